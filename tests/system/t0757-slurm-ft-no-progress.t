#!/bin/bash
# t0757-slurm-ft-no-progress (Slurm testbed): rank 1 of a 2-node
# job crashes before step 1 on every attempt -> the job fails with cause
# no_progress after K = 3 attempts, although max_restarts would allow 10:
# no endless loop, no further Slurm job, no trainer left.  A rank's own
# exit leaves its node in: every restart runs in place, in the first
# Slurm job on the same nodes, and nothing is excluded.
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 4
submit "$(dttrain_spec noprog 2 "--inject-crash 1:0" '{"restart": {"max_restarts": 10}}')" \
    || bail "submit failed"
T0=$(now_ms)
check "the job fails" wait_state "$ID" failed 90
wait_att "$ID" failed 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '{reason: .data.reason, failure: (.data.failure | {cause, attempt_cause, verdict, no_progress_streak})}' "$TMP/j.json" | sed 's/^/# /'
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, cause_rank, exit: .evidence.exit_code, nodelist}]' "$TMP/j.json" | sed 's/^/# /'
echo "# (times relative to the job's submission; each failure is injected by dttrain at step 0)"
for a in 1 2; do timeline "$ID" "$T0" "$a"; done
python3 - "$TMP/j.json" "$T0" <<'PYEOF'
import json, sys, datetime
j = json.load(open(sys.argv[1]))["data"]; t0 = int(sys.argv[2])
def ms(t): return int(datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000) if t else None
a = j["attempts"][-1]
e = ms(a.get("end_time")) or ms(a.get("fail_time"))
print("#   attempt %d failed (%s) %s; job failed: reason %s" % (a["attempt"], a.get("cause"),
      "%+.3f s" % ((e - t0) / 1000.0) if e else "n/a", j.get("reason")))
PYEOF
check "reason no_progress" jqt '.data.reason == "no_progress" and .data.failure.cause == "no_progress"' "$TMP/j.json"
check "after exactly 3 attempts, each failed by a trainer exit of rank 1" \
    jqt '(.data.attempts | length) == 3 and all(.data.attempts[]; .state == "failed"
         and .cause == "trainer_exit" and .cause_rank == 1)' "$TMP/j.json"
check "no further attempt is started" sh -c "sleep 3; test \"\$(curl -s $URL/v1/jobs/$ID | jq '.data.attempts | length')\" = 3"
check "no node was excluded; attempts 2 and 3 ran in place in the first Slurm job" \
    jqt '.data.exclude == [] and .data.attempts[0].restart_path == null
         and all(.data.attempts[1:][]; .restart_path == "in_place"
                 and .slurm_job_id == $j.data.attempts[0].slurm_job_id)' --argjson j "$(cat "$TMP/j.json")" "$TMP/j.json"
check "no Slurm job left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
