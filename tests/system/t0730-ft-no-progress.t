#!/bin/bash
# t0730-ft-no-progress (local launcher): a job whose every attempt
# fails before passing its resume step fails with cause no_progress after
# K = 3 attempts, although max_restarts would allow 10: no endless loop.
# A rank's own exit leaves its node in (the restart runs in place), so
# nothing is excluded: the guard, not the exclusions, ends the loop.
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
submit "$(dttrain_spec noprog 2 "--inject-crash 1:0" '{"restart": {"max_restarts": 10}}')" \
    || bail "submit failed"
check "the job fails" wait_state "$ID" failed 90
wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[-1].state')\" = failed"
api GET "/v1/jobs/$ID" > "$TMP/j.json"
jq -c '{reason: .data.reason, failure: (.data.failure | {cause, attempt_cause, verdict, no_progress_streak})}' "$TMP/j.json" | sed 's/^/# /'
check "reason no_progress" jqt '.data.reason == "no_progress" and .data.failure.cause == "no_progress"' "$TMP/j.json"
jq -c '[.data.attempts[] | {attempt, state, cause, cause_rank, exit: .evidence.exit_code, nodelist, restart_path}]' "$TMP/j.json" | sed 's/^/# /'
check "after exactly 3 attempts, each failed by a trainer exit before step 1" \
    jqt '(.data.attempts | length) == 3 and all(.data.attempts[]; .state == "failed"
         and .cause == "trainer_exit")' "$TMP/j.json"
check "no further attempt is started" sh -c "sleep 3; test \"\$(curl -s $URL/v1/jobs/$ID | jq '.data.attempts | length')\" = 3"
check "no node was excluded (a rank's own exit restarts in place)" jqt '.data.exclude == []' "$TMP/j.json"
check "the restarts say their path (local launcher: new_allocation)" \
    jqt '.data.attempts[0].restart_path == null and all(.data.attempts[1:][]; .restart_path == "new_allocation")' "$TMP/j.json"
done_testing
