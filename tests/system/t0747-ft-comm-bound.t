#!/bin/bash
# t0747-ft-comm-bound (local launcher, real dttrain jobs): the
# communication-bound early warning.  A tiny model over 8 ranks (4 pretend
# nodes x 2 ranks) spends most of each step in its collectives: the
# controller shows its exposed communication share in the job view, in
# dtctl show and on /metrics, and raises one comm_bound event once the
# share stayed above comm_bound.threshold for comm_bound.window_steps
# steps.  A job of one rank with a large model spends its steps computing
# (no peer to wait for, a large batch): its share stays low and no event
# is raised.  Model FLOP utilisation: dttrain reports its model FLOPs and
# a peak (--peak-flops, or measured at start), so both jobs show an MFU
# in (0, 1], live and per attempt, with its gauge; a trainer that reports steps but no FLOPs
# (steptrainer) shows the communication figures with a null MFU.
FT_STEPS=${FT_STEPS:-300}
# The MLP: its hidden width sets the compute of a step without changing
# the context, so one flag makes a job communication- or compute-bound.
FT_MODEL="--model mlp --hidden 64 --layers 2"
. "$(dirname "$0")/ft-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl

write_conf "LocalNodes=4" "MetricsPerJob=yes"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

events_of () { sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $1 AND kind = 'comm_bound'"; }

# ---- communication-bound: a tiny model, 8 ranks ------------------------------------------
# (150 steps: the warning comes after about 20, and what is checked while
# the job runs is read right after it)
spec=$(dttrain_spec commbound 4 "--hidden 8 --layers 1 --global-batch 8 --peak-flops 1e11 --steps 150" \
    '{"ranks_per_node": 2, "comm_bound": {"threshold": 0.5, "window_steps": 10}, "checkpoint": {"every_steps": 0}}')
submit "$spec" || bail "submit failed"
CB=$ID
seen=no
for _ in $(seq 600); do
    curl -s "$URL/v1/jobs/$CB" > "$TMP/cb.json"
    jqt '.data.comm.comm_bound == true' "$TMP/cb.json" && { seen=yes; break; }
    jqt '.data.state != "running" and .data.state != "pending"' "$TMP/cb.json" && break
    sleep 0.2
done
jq -c '.data.comm' "$TMP/cb.json" | sed 's/^/# comm: /'
check "the job view shows the exposed share above the threshold, comm_bound true" test $seen = yes
check "... with the threshold and window of the spec and a compute spread in [0, 1]" \
    jqt '.data.comm.threshold == 0.5 and .data.comm.window_steps == 10 and .data.comm.exposed_share > 0.5
         and .data.comm.compute_spread >= 0 and .data.comm.compute_spread <= 1' "$TMP/cb.json"
check "... and its MFU in (0, 1] (dttrain reports its FLOPs)" \
    jqt '.data.comm.mfu > 0 and .data.comm.mfu <= 1' "$TMP/cb.json"
DTCTL_CONTROLLER=$URL "$DTCTL" show "$CB" > "$TMP/show.txt"
check "dtctl show prints the share, the MFU and COMM-BOUND" \
    eval 'grep -Eq "^Communication: exposed share .*, MFU [0-9.]+%" "$TMP/show.txt" && grep -q "COMM-BOUND" "$TMP/show.txt"'
# The step reports carry per-dimension figures: a data-parallel job moves
# gradient bytes along dp only.
check "the job view's comm has per-dimension figures: dp bytes moved, none along tp or pp" \
    jqt '.data.comm.dims.dp.bytes > 0 and .data.comm.dims.dp.comm_ms > 0
         and .data.comm.dims.tp.bytes == 0 and .data.comm.dims.pp.bytes == 0' "$TMP/cb.json"
check "dtctl show prints them" grep -Eq "^    dp +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/show.txt"
curl -s "$URL/metrics" > "$TMP/metrics.txt"
check "/metrics has the job's gauges" \
    eval 'grep -Eq "^dtctld_job_comm_exposed_share\{job=\"$CB\"\} 0\.[5-9]" "$TMP/metrics.txt" &&
          grep -q "^dtctld_job_comm_bound{job=\"$CB\"} 1" "$TMP/metrics.txt" &&
          grep -Eq "^dtctld_job_compute_spread\{job=\"$CB\"\} [01]\." "$TMP/metrics.txt" &&
          grep -Eq "^dtctld_job_mfu\{job=\"$CB\"\} 0\.[0-9]*[1-9]" "$TMP/metrics.txt"'
check "the job completes" wait_state "$CB" completed 180
check "exactly one comm_bound event" test "$(events_of "$CB")" = 1
api GET "/v1/jobs/$CB/events" > "$TMP/ev.json"
jq -c '.data[] | select(.kind == "comm_bound") | .detail, .data' "$TMP/ev.json" | sed 's/^/# /'
check "... its data: share above 0.5 over at least 10 steps" \
    jqt '[.data[] | select(.kind == "comm_bound")][0].data | .exposed_share > 0.5 and .threshold == 0.5
         and .window_steps == 10 and .step - .since_step >= 10' "$TMP/ev.json"

api GET "/v1/jobs/$CB" > "$TMP/cb.json"
jq -c '.data.attempts[0] | {model_flops, peak_flops, peak_source, mfu}' "$TMP/cb.json" | sed 's/^/# perf: /'
check "its attempt keeps the model FLOPs of 8 ranks, their 8 peaks of --peak-flops, an MFU in (0, 1]" \
    jqt '.data.attempts[0] | .model_flops > 0 and .peak_flops == 8e11 and .peak_source == "option"
         and .mfu > 0 and .mfu <= 1' "$TMP/cb.json"

# ---- no FLOPs reported: steptrainer (steps, compute times, no perf) -------------------------
submit "{\"name\": \"noflops\", \"nodes\": 1, \"command\": [\"$TOP_BUILDDIR/tests/system/steptrainer\", \"--steps\", \"150\", \"--step-ms\", \"20\"]}" \
    || bail "submit failed"
NF=$ID

# ---- compute-bound: one rank, a larger model ------------------------------------------------
spec=$(dttrain_spec computebound 1 "--hidden 128 --global-batch 1024" '{"comm_bound": {"threshold": 0.5, "window_steps": 10}, "checkpoint": {"every_steps": 0}}')
submit "$spec" || bail "submit failed"
NB=$ID
shown=no high=no mfu=no nf=no
for _ in $(seq 600); do
    curl -s "$URL/v1/jobs/$NB" > "$TMP/nb.json"
    if jqt '.data.comm.exposed_share != null' "$TMP/nb.json"; then
        shown=yes
        jq -c '.data.comm' "$TMP/nb.json" > "$TMP/nb-comm.json"
        jqt '.data.comm.exposed_share < 0.5' "$TMP/nb.json" || high=yes
        jqt '.data.comm.mfu > 0 and .data.comm.mfu <= 1' "$TMP/nb.json" && mfu=yes
    fi
    curl -s "$URL/v1/jobs/$NF" > "$TMP/nf.json"
    jqt '.data.comm != null' "$TMP/nf.json" && { nf=yes; jq -c .data.comm "$TMP/nf.json" > "$TMP/nf-comm.json"; }
    jqt '.data.state != "running" and .data.state != "pending"' "$TMP/nb.json" && break
    sleep 0.2
done
sed 's/^/# comm (last seen): /' "$TMP/nb-comm.json" 2>/dev/null
check "the compute-bound job's share was shown while it ran" test $shown = yes
check "... and stayed below the threshold" test $high = no
check "... with its MFU in (0, 1]" test $mfu = yes
check "... with no per-dimension figures (one rank, no layout)" jqt '.dims == null' "$TMP/nb-comm.json"
check "the compute-bound job completes" wait_state "$NB" completed 180
api GET "/v1/jobs/$NB" > "$TMP/nb.json"
jq -c '.data.attempts[0] | {model_flops, peak_flops, peak_source, mfu}' "$TMP/nb.json" | sed 's/^/# perf: /'
check "... its attempt's MFU in (0, 1] against a peak measured at start" \
    jqt '.data.attempts[0] | .mfu > 0 and .mfu <= 1 and .peak_flops > 0 and .peak_source == "sgemm512"' "$TMP/nb.json"
check "... with no comm_bound event" test "$(events_of "$NB")" = 0
sed 's/^/# no FLOPs (last seen): /' "$TMP/nf-comm.json" 2>/dev/null
check "a trainer that reports no FLOPs: its communication figures shown with a null MFU" \
    eval 'test $nf = yes && jqt ".mfu == null and .exposed_share != null" "$TMP/nf-comm.json"'
check "... it completes with a null MFU, model_flops and peak_flops" wait_state "$NF" completed 60
api GET "/v1/jobs/$NF" > "$TMP/nf.json"
check "... in its attempt" \
    jqt '.data.attempts[0] | .mfu == null and .model_flops == null and .peak_flops == null' "$TMP/nf.json"

# ---- the spec keys are validated ------------------------------------------------------------
api POST /v1/jobs -d '{"command":["true"],"comm_bound":{"threshold":0}}' > "$TMP/bad.json"
check "comm_bound.threshold 0: 400 naming the field" \
    eval '[ "$(status)" = 400 ] && jqt ".errors[0].field == \"comm_bound.threshold\"" "$TMP/bad.json"'
api POST /v1/jobs -d '{"command":["true"],"comm_bound":{"window":5}}' > "$TMP/bad.json"
check "an unknown comm_bound key: 400" test "$(status)" = 400
done_testing
