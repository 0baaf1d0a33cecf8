#!/bin/bash
# t0120-ctld-openapi: every route registered in orchestrator/*.c appears
# in schemas/openapi.json with its method, every documented route answers
# (not 404), and the documents parse.
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
n=0; failed=0
ok ()   { n=$((n + 1)); echo "ok $n - $*"; }
fail () { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
command -v jq >/dev/null || { echo "1..0 # SKIP jq not installed"; exit 77; }

API=$TOP_SRCDIR/schemas/openapi.json
jq -e . "$API" >/dev/null && ok "openapi.json parses" || fail "openapi.json parses"
jq -e . "$TOP_SRCDIR/schemas/job.schema.json" >/dev/null && ok "job.schema.json parses" \
    || fail "job.schema.json parses"

# Routes in the code: the { "METHOD", "/path", handler } rows of the tables.
routes=$(grep -ho '{ *"\(GET\|POST\|PUT\|DELETE\|PATCH\)", *"/[^"]*"' \
             "$TOP_SRCDIR"/orchestrator/*.c | sed 's/{ *"\([A-Z]*\)", *"\([^"]*\)"/\1 \2/' | sort -u)
count=$(echo "$routes" | grep -c .)
[ "$count" -ge 18 ] && ok "found $count routes in the code" || fail "found only $count routes in the code"
while read -r method path; do
    m=$(echo "$method" | tr A-Z a-z)
    if jq -e --arg p "$path" --arg m "$m" '.paths[$p][$m] != null' "$API" >/dev/null; then
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
echo "1..$n"
exit $failed
