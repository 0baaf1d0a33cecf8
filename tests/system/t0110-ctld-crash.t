#!/bin/bash
# t0110-ctld-crash: kill -9 of dtctld right after a submit was acknowledged
# loses nothing: the job, its attempt and its events are there after a
# restart.  A running attempt is reloaded and supervised again (its agents
# reconnect), and can then be cancelled.  The database stays intact.
. "$(dirname "$0")/ctld-lib.sh"

# One port for all the restarts: the agents keep the controller's URL.
# It is outside the ephemeral range: an agent dialling it while dtctld is
# down could otherwise be given it as its own source port and connect to
# itself, and the restarted dtctld could not bind it.
P=$(free_port)
read -r eph_lo eph_hi < /proc/sys/net/ipv4/ip_local_port_range
check "the controller's fixed port $P is outside the ephemeral range $eph_lo-$eph_hi" \
    test "$P" -lt "$eph_lo" -o "$P" -gt "$eph_hi"
write_conf "ListenPort=$P"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

# ---- SIGKILL right after the 201 --------------------------------------------
api POST /v1/jobs -d '{"name":"acked","nodes":1,"command":["sleep","300"]}' > "$TMP/s.json"
kill -9 "$CTLD_PID"
check "submit was acknowledged (201) before the kill" test "$(status)" = 201
ID=$(jq -r .data.id "$TMP/s.json")
wait "$CTLD_PID" 2>/dev/null
check "integrity after kill -9" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok

start_fg || bail "dtctld did not restart: $(tail "$TMP/ctld.log")"
api GET /v1/jobs/$ID > "$TMP/j.json"
check "the job is there after the restart" test "$(status)" = 200
check "same name and spec" jqt '.data.name == "acked" and .data.spec.command == ["sleep","300"]' "$TMP/j.json"
check "its attempt 1 is there" jqt '.data.attempts[0].attempt == 1' "$TMP/j.json"
check "its submit event is there" \
    eval "curl -s $URL/v1/jobs/$ID/events | jqt 'any(.data[]; .kind == \"job_submitted\")'"
check "the job runs (reloaded and supervised)" \
    wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = running"

# ---- kill -9 with a running attempt: it continues ---------------------------------
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
sleep 1
start_fg || bail "dtctld did not restart: $(tail "$TMP/ctld.log")"
check "after a second kill -9 the job is still running" test "$(job_state $ID)" = running
check "agents keep heartbeating the new controller (no node_lost after the node timeout)" \
    sh -c "sleep 4; test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = running"
api POST /v1/jobs/$ID/cancel >/dev/null
check "the reloaded job can be cancelled" test "$(status)" = 200
check "its attempt ends cancelled" wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[-1].state')\" = cancelled"
check "its agent is gone" wait_for 10 sh -c "! pgrep -f -- '[-]-state-dir $TMP/users/0/agents/job-$ID[.]' >/dev/null"

# ---- a burst of acknowledged submits, then kill -9 -----------------------------------
acked=0
for i in 1 2 3 4 5; do
    api POST /v1/jobs -d '{"name":"burst","nodes":1,"command":["true"]}' >/dev/null
    [ "$(status)" = 201 ] && acked=$((acked + 1))
done
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "all 5 submits of the burst were acknowledged (201)" test "$acked" -eq 5
check "every acknowledged submit is in the database" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM jobs WHERE name = 'burst'")" = "$acked"
check "each with its attempt and events" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(DISTINCT j.id) FROM jobs j JOIN attempts a ON a.job_id = j.id JOIN events e ON e.job_id = j.id AND e.kind = 'job_submitted' WHERE j.name = 'burst'")" = "$acked"
start_fg || bail "dtctld did not restart"
check "the burst jobs complete after the restart" \
    wait_for 40 sh -c "test \"\$(curl -s '$URL/v1/jobs?name=burst&state=completed' | jq '.data | length')\" = $acked"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
done_testing
