# bench_ui.sh: part "ui" of bench/run (sourced by bench_parts.sh; uses rec,
# note, say, start_ctld, stop_ctld, wait_for, calc, B, TMP, REPS, SRC).
#
# The web page's latency with a long run: one job whose metrics table holds
# 100,000 points (written into the controller's database while it is
# stopped, as a long run leaves it), then, from a warm controller, 20 GETs
# of each per repetition: the job page (/ui/job.html), the charting library
# (/ui/lib/chart.js), the page's data route (GET /v1/jobs/ID/metrics
# ?max_points=1500, downsampled by the controller) and, as the reference,
# the same route without max_points (every point).  Goals: the data
# answer under 200 KB and its GET under 50 ms.  The controller keeps a
# route's answer until the job's metrics change, so the 20 GETs are
# answered from memory but for the first; the first GET after a change
# (a new max_points each time: nothing kept) is measured on its own,
# ui.data_cold_ms, against the same kept answer.

ui_get () {   # PATH -> "seconds bytes"
    curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "$URL$1"
}

part_ui () {
    local d=$TMP/ui id rep i path key n=${UI_POINTS:-100000}
    [ -f /usr/share/javascript/chart.js/chart.min.js ] \
        || note ui "libjs-chart.js is not installed (scripts/install-deps): /ui/lib/chart.js not measured"
    say "web page: page and data route latency with $n metric points x $REPS"
    start_ctld "$d" local "UiDir=$SRC/ui" || return
    id=$(curl -s -X POST "$URL/v1/jobs" -d '{"name":"long","nodes":1,"command":["true"]}' | jq -r '.data.id // empty')
    [ -n "$id" ] || { note ui "could not submit the job: part skipped"; stop_ctld; return; }
    wait_for 30 sh -c "curl -s $URL/v1/jobs/$id | jq -e '.data.state == \"completed\"' >/dev/null"
    stop_ctld
    sqlite3 "$d/state/dtctld.db" "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
      INSERT OR REPLACE INTO metrics (job_id, step, attempt, time, loss, samples_per_s, compute_ms, comm_ms)
      SELECT $id, i, CASE WHEN i <= $n / 2 THEN 1 ELSE 2 END, 1700000000000 + i * 250,
             5.0 / (1 + i / 1000.0), 256.0, 40.0 + (i % 7), 9.0 + (i % 3) FROM s;" \
        || { note ui "could not fill the metrics table: part skipped"; return; }
    # as the controller's user (start_ctld), and a fresh port file
    [ "$(id -u)" -eq 0 ] && chown nobody "$d"/state/dtctld.db*
    rm -f "$d/port"
    start_ctld "$d" local "UiDir=$SRC/ui" || return
    [ "$(curl -s "$URL/v1/jobs/$id/metrics?max_points=1000" | jq ".data.total // 0")" -ge "$n" ] \
        || { note ui "the controller does not see the $n points: part skipped"; stop_ctld; return; }
    for path in "/ui/job.html" "/ui/lib/chart.js" "/v1/jobs/$id/metrics?max_points=1000" "/v1/jobs/$id/metrics"; do
        ui_get "$path" > /dev/null   # warm
    done
    for rep in $(seq "$REPS"); do
        for i in $(seq 20); do
            set -- $(ui_get /ui/job.html); rec ui.page_ms "$(calc "$1 * 1000")"
            set -- $(ui_get /ui/lib/chart.js); rec ui.chartjs_ms "$(calc "$1 * 1000")"
            set -- $(ui_get "/v1/jobs/$id/metrics?max_points=1000")
            rec ui.data_ms "$(calc "$1 * 1000")"; rec ui.data_bytes "$2"
            set -- $(ui_get "/v1/jobs/$id/metrics")
            rec ui.full_ms "$(calc "$1 * 1000")"; rec ui.full_bytes "$2"
        done
        for i in $(seq 5); do
            set -- $(ui_get "/v1/jobs/$id/metrics?max_points=$((1000 + rep * 10 + i))")
            rec ui.data_cold_ms "$(calc "$1 * 1000")"
        done
    done
    stop_ctld
}
