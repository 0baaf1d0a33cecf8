#!/bin/bash
# t0120-ctld-openapi: every route registered in orchestrator/*.c appears
# in schemas/openapi.json with its method, every documented route answers
# a request to a real dtctld (not the router's 404 or 405), and the
# documents parse.
. "$(dirname "$0")/ctld-lib.sh"

API=$TOP_SRCDIR/schemas/openapi.json
check "openapi.json parses" jqt . "$API"
check "job.schema.json parses" jqt . "$TOP_SRCDIR/schemas/job.schema.json"

# Routes in the code: the { "METHOD", "/path", handler } rows of the tables.
routes=$(grep -ho '{ *"\(GET\|POST\|PUT\|DELETE\|PATCH\)", *"/[^"]*"' \
             "$TOP_SRCDIR"/orchestrator/*.c | sed 's/{ *"\([A-Z]*\)", *"\([^"]*\)"/\1 \2/' | sort -u)
count=$(echo "$routes" | grep -c .)
[ "$count" -ge 18 ] && ok "found $count routes in the code" || fail "found only $count routes in the code"
while read -r method path; do
    m=$(echo "$method" | tr A-Z a-z)
    if jqt --arg p "$path" --arg m "$m" '.paths[$p][$m] != null' "$API"; then
        ok "$method $path is documented"
    else
        fail "$method $path is not in schemas/openapi.json"
    fi
done <<<"$routes"

# And the other way: nothing documented that the code does not serve.
for p in $(jq -r '.paths | keys[]' "$API"); do
    for m in $(jq -r --arg p "$p" '.paths[$p] | keys[]' "$API"); do
        M=$(echo "$m" | tr a-z A-Z)
        if grep -qx "$M $p" <<<"$routes"; then ok "documented $M $p is served"
        else fail "documented $M $p is not served by the code"; fi
    done
done

# Every documented route answers: a dtctld with one running job (its id,
# node and agent token fill the path parameters); each route is asked once,
# the job's cancel last.  The router answers an unserved path with 404 "no
# such resource" and a wrong method with 405; a handler's own answer (200,
# 400 for an empty body, 404 for an unknown key...) shows the route exists.
write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
ID=$(api POST /v1/jobs -d '{"name": "routes", "nodes": 1, "command": ["sleep", "300"]}' | jq -r .data.id)
[ "$(status)" = 201 ] || bail "submit: $(status)"
wait_for 30 eval '[ "$(job_state "$ID")" = running ]' || bail "the job did not run"
# The token itself (the database keeps only its SHA-256): from the agent's
# environment.  With it the agent and alloc routes reach their handlers;
# a 401 there would mean the gate refused the request, not that the route
# answers.
TOKEN=$(attempt_token "$ID")
[ -n "$TOKEN" ] || bail "no agent token for job $ID (no agent's environment names it)"
asked=0
while read -r m p; do
    M=$(echo "$m" | tr a-z A-Z)
    path=${p//\{id\}/$ID}; path=${path//\{name\}/local1}; path=${path//\{key\}/routes}
    args=()
    case $p in /v1/agent/*|/v1/alloc/*) args+=(-H "Authorization: Bearer $TOKEN") ;; esac
    case $M in POST|PUT) args+=(-H 'Content-Type: application/json' -d '{"value": "aGk="}') ;; esac
    api "$M" "$path" "${args[@]}" > "$TMP/route.out"
    code=$(status)
    if [ "$code" = 405 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] \
        || grep -q "no such resource" "$TMP/route.out" \
        || { [ "$p" != /metrics ] && [ "$p" != /ui ] && ! jqt . "$TMP/route.out"; } \
        || ! [ -s "$TMP/route.out" ] \
        || { [ "$code" = 401 ] && [[ $p == /v1/agent/* || $p == /v1/alloc/* ]]; }; then
        fail "documented $M $p answers ($path: $code $(head -c 200 "$TMP/route.out"))"
    else
        ok "documented $M $p answers ($code)"
    fi
    asked=$((asked + 1))
done < <(jq -r '.paths | to_entries[] | .key as $p | .value | keys[] | "\(.) \($p)"' "$API" \
         | sort -s -k2,2 | awk '$2 == "/v1/jobs/{id}/cancel" { last = $0; next } { print } END { if (last) print last }')
check "asked every documented route ($asked)" test "$asked" -eq "$(jq '[.paths[] | keys[]] | length' "$API")"
done_testing
