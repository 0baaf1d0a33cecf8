#!/bin/bash
# t0747-ft-comm-bound (local launcher, real dttrain jobs): the
# communication-bound early warning.  A tiny model over 8 ranks (4 pretend
# nodes x 2 ranks) spends most of each step in its collectives: the
# controller shows its exposed communication share in the job view, in
# dtctl show and on /metrics, and raises one comm_bound event once the
# share stayed above comm_bound.threshold for comm_bound.window_steps
# steps.  A job of one rank with a large model spends its steps computing
# (no peer to wait for, a large batch): its share stays low and no event
# is raised.
FT_STEPS=${FT_STEPS:-300}
# The MLP: its hidden width sets the compute of a step without changing
# the context, so one flag makes a job communication- or compute-bound.
FT_MODEL="--model mlp --hidden 64 --layers 2"
. "$(dirname "$0")/ft-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl

write_conf "LocalNodes=4"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

events_of () { sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $1 AND kind = 'comm_bound'"; }

# ---- communication-bound: a tiny model, 8 ranks ------------------------------------------
spec=$(dttrain_spec commbound 4 "--hidden 8 --layers 1 --global-batch 8" \
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
         and .data.comm.compute_spread >= 0 and .data.comm.compute_spread <= 1 and .data.comm.mfu == null' "$TMP/cb.json"
DTCTL_CONTROLLER=$URL "$DTCTL" show "$CB" > "$TMP/show.txt"
check "dtctl show prints the share and COMM-BOUND" \
    eval 'grep -q "^Communication: exposed share" "$TMP/show.txt" && grep -q "COMM-BOUND" "$TMP/show.txt"'
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
          grep -Eq "^dtctld_job_compute_spread\{job=\"$CB\"\} [01]\." "$TMP/metrics.txt"'
check "the job completes" wait_state "$CB" completed 180
check "exactly one comm_bound event" test "$(events_of "$CB")" = 1
api GET "/v1/jobs/$CB/events" > "$TMP/ev.json"
jq -c '.data[] | select(.kind == "comm_bound") | .detail, .data' "$TMP/ev.json" | sed 's/^/# /'
check "... its data: share above 0.5 over at least 10 steps" \
    jqt '[.data[] | select(.kind == "comm_bound")][0].data | .exposed_share > 0.5 and .threshold == 0.5
         and .window_steps == 10 and .step - .since_step >= 10' "$TMP/ev.json"

# ---- compute-bound: one rank, a larger model ------------------------------------------------
spec=$(dttrain_spec computebound 1 "--hidden 128 --global-batch 1024" '{"comm_bound": {"threshold": 0.5, "window_steps": 10}, "checkpoint": {"every_steps": 0}}')
submit "$spec" || bail "submit failed"
NB=$ID
shown=no high=no
for _ in $(seq 600); do
    curl -s "$URL/v1/jobs/$NB" > "$TMP/nb.json"
    if jqt '.data.comm.exposed_share != null' "$TMP/nb.json"; then
        shown=yes
        jq -c '.data.comm' "$TMP/nb.json" > "$TMP/nb-comm.json"
        jqt '.data.comm.exposed_share < 0.5' "$TMP/nb.json" || high=yes
    fi
    jqt '.data.state != "running" and .data.state != "pending"' "$TMP/nb.json" && break
    sleep 0.2
done
sed 's/^/# comm (last seen): /' "$TMP/nb-comm.json" 2>/dev/null
check "the compute-bound job's share was shown while it ran" test $shown = yes
check "... and stayed below the threshold" test $high = no
check "... with no per-dimension figures (one rank, no layout)" jqt '.dims == null' "$TMP/nb-comm.json"
check "the compute-bound job completes" wait_state "$NB" completed 180
check "... with no comm_bound event" test "$(events_of "$NB")" = 0

# ---- the spec keys are validated ------------------------------------------------------------
api POST /v1/jobs -d '{"command":["true"],"comm_bound":{"threshold":0}}' > "$TMP/bad.json"
check "comm_bound.threshold 0: 400 naming the field" \
    eval '[ "$(status)" = 400 ] && jqt ".errors[0].field == \"comm_bound.threshold\"" "$TMP/bad.json"'
api POST /v1/jobs -d '{"command":["true"],"comm_bound":{"window":5}}' > "$TMP/bad.json"
check "an unknown comm_bound key: 400" test "$(status)" = 400
done_testing
