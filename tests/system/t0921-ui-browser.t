#!/bin/bash
# t0921-ui-browser: the web page in a real browser (Debian's headless
# Chromium through chromedriver and python3-selenium; ui-browser.py has
# the checks) against a real dtctld (MUNGE, PrivateData=jobs) and a real
# dttrain job of 2 ranks whose rank 1 crashes mid-run (--inject-crash):
# the jobs, job and nodes pages load with no JavaScript error in the
# console; the loss chart holds every point of both attempts with the
# failure, its detection, the restart and the resume marked; the goodput
# bar matches the report; dtbob's link shows neither root's nor dtalice's
# job; an expired link is refused and the page says so; the nodes page
# shows a node an admin marked suspect, with its history; the job's
# attempts carry dttrain's model FLOP utilisation, in (0, 1], shown in the
# attempts table, where dtalice's job (no trainer reporting FLOPs) has none;
# the jobs list shows the time since each job's last checkpoint.
FT_STEPS=200
# The MLP: its hidden width makes steps of tens of ms (tens of metric
# points per attempt) with one flag.
FT_MODEL="--model mlp --hidden 64 --layers 2"
. "$(dirname "$0")/ft-lib.sh"
. "$(dirname "$0")/users-lib.sh"
dt_users_setup
A=$DT_USER_A B=$DT_USER_B
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
# scripts/install-deps installs all of these (CI runs it): missing is a failure.
for f in /usr/bin/chromium /usr/bin/chromedriver /usr/share/javascript/chart.js/chart.min.js; do
    [ -e "$f" ] || bail "$f is missing: run scripts/install-deps"
done
/usr/bin/python3 -c 'import selenium' 2>/dev/null || bail "python3-selenium is missing: run scripts/install-deps"

write_conf "AdminUsers=root" "PrivateData=jobs,env,stderr" "UiDir=$TOP_SRCDIR/ui"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
link () { as_user "$1" env DTCTL_CONTROLLER="$URL" "$DTCTL" ui --json "${@:2}" | jq -r .token; }
# dtalice's link of 1 s, made first: it has long expired when the browser
# uses it (checked below), with no sleep for it.
EXP_T=$(link "$A" --ttl 1)
EXP_MADE=${EPOCHREALTIME/./}
MODEL_ARGS="$MODEL_ARGS --hidden 768 --inject-slow 0:3"   # steps of tens of ms: tens of metric points per attempt

# Rank 1 crashes at step 70 in the first attempt only (TORCHELASTIC_RESTART_COUNT 0).
submit "$(dttrain_spec uijob 2 "" | jq --arg a "$MODEL_ARGS" '.command = ["sh", "-c",
    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-crash 1:100; fi; exec \"$0\" \($a)",
    .command[3]]')" || bail "submit failed"
JOB=$ID
DTCURL_USER=$A api POST /v1/jobs -d '{"name":"alices","nodes":1,"command":["sleep","600"]}' > "$TMP/ja.json"
AJOB=$(jq -r .data.id "$TMP/ja.json")
check "the job completes after its injected failure" wait_state "$JOB" completed 120
wait_att "$JOB" succeeded 20
# An attempt's MFU is over its step-time samples, which the controller
# writes with its flush after the attempt ends: read the job once two
# reads a second apart agree, so that the page is compared with final
# figures.
prev=
for _ in $(seq 15); do
    api GET "/v1/jobs/$JOB" > "$TMP/j.json"
    cur=$(jq -c '[.data.attempts[].mfu]' "$TMP/j.json")
    [ -n "$prev" ] && [ "$cur" = "$prev" ] && break
    prev=$cur
    sleep 1
done
check "... in two attempts, the first failed with trainer_exit" \
    jqt '(.data.attempts | length) == 2 and .data.attempts[0].cause == "trainer_exit"' "$TMP/j.json"
jq -c '[.data.attempts[] | {attempt, model_flops, peak_source, mfu}]' "$TMP/j.json" | sed 's/^/# perf: /'
check "... each attempt with dttrain's model FLOPs, a measured peak and an MFU in (0, 1]" \
    jqt '[.data.attempts[] | .model_flops > 0 and .peak_source == "sgemm512" and .mfu > 0 and .mfu <= 1] == [true, true]' "$TMP/j.json"
check "... and the time of its last checkpoint" jqt '.data.last_checkpoint_time | type == "string"' "$TMP/j.json"
api GET "/v1/jobs/$JOB/report" | jq .data > "$TMP/report.json"
api GET "/v1/jobs/$AJOB" > "$TMP/ja.json"
check "dtalice's job (sleep: no FLOPs reported) has a null MFU" \
    jqt '.data.attempts[0] | .mfu == null and .model_flops == null' "$TMP/ja.json"
steps=$(sqlite3 "$TMP/state/dtctld.db" "SELECT attempt, count(*) FROM metrics WHERE job_id = $JOB AND loss IS NOT NULL GROUP BY attempt" \
    | jq -c -R -s 'split("\n") | map(select(. != "") | split("|")) | map({(.[0]): (.[1] | tonumber)}) | add')
echo "# metric rows with a loss, per attempt: $steps"

# An admin takes the crashed rank's node out of service: the nodes page
# shows it suspect, with its history.
SUSPECT=$(jq -r '.data.attempts[0].cause_node' "$TMP/j.json")
api POST "/v1/nodes/$SUSPECT/suspect" > /dev/null
check "root marks $SUSPECT suspect" test "$(status)" = 200

ROOT_T=$(DTCTL_CONTROLLER=$URL "$DTCTL" ui --json | jq -r .token)
BOB_T=$(link "$B")
ALICE_T=$(link "$A")
# (1.5 s after the expiring link was made, at least)
left_us=$(( EXP_MADE + 1500000 - ${EPOCHREALTIME/./} ))
[ "$left_us" -gt 0 ] && sleep "$(printf '%d.%06d' $((left_us / 1000000)) $((left_us % 1000000)))"
jq -n --arg root "$ROOT_T" --arg bob "$BOB_T" --arg alice "$ALICE_T" --arg exp "$EXP_T" \
    --argjson job "$JOB" --argjson ajob "$AJOB" --slurpfile rep "$TMP/report.json" \
    --argjson steps "$steps" --arg an "$A" --arg bn "$B" --arg sus "$SUSPECT" \
    --argjson mfu "$(jq -c '[.data.attempts[].mfu]' "$TMP/j.json")" \
    '{root: $root, bob: $bob, alice: $alice, expired: $exp, job: $job, alice_job: $ajob,
      report: $rep[0], steps: $steps, alice_name: $an, bob_name: $bn, suspect: $sus, mfu: $mfu}' > "$TMP/cases.json"

HOME=$TMP DT_UI_SCREENSHOTS=${DT_UI_SCREENSHOTS:-} timeout 240 /usr/bin/python3 "$TOP_SRCDIR/tests/system/ui-browser.py" "$URL" "$TMP/cases.json" \
    > "$TMP/browser.out" 2> "$TMP/browser.err"
rc=$?
while read -r line; do
    case $line in
        "ok "*) ok "${line#ok }" ;;
        "not ok "*) fail "${line#not ok }" ;;
    esac
done < "$TMP/browser.out"
check "the browser run finished (exit $rc)" test $rc -eq 0 || tail -20 "$TMP/browser.err" | diag
api POST "/v1/jobs/$AJOB/cancel" > /dev/null
done_testing
