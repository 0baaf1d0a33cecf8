# munge-lib.sh: MUNGE for the system tests that talk to a dtctld with
# AuthType=munge (the only choice for a dtctld that runs as root).
#
#   munge_setup DIR   make sure munged runs (start it the testbed's way if
#                     not: it is left running, as scripts/test does), then
#                     put DIR/bin/curl first in PATH: a wrapper around
#                     dtcurl, so that every plain `curl` of the test carries
#                     a credential bound to its request.  Programs started
#                     before the call keep the real curl; start dtctld
#                     with PATH=$DT_PATH_NOWRAP (its batch scripts and
#                     agents use their own tokens, not MUNGE).
#                     DTCURL_USER=USER curl ... sends as that user.
#                     With DT_API_VALIDATE set (scripts/test sets it), the
#                     wrapper also hands every answer of the controller to
#                     one validator (api_validator_start, below), and a
#                     mismatch fails the test when it finishes.
munge_setup () {
    local dir=$1 realcurl DT_API_FIFO=
    if ! munge -n </dev/null >/dev/null 2>&1; then
        [ "$(id -u)" -eq 0 ] && [ -x /usr/sbin/munged ] || { echo "1..0 # SKIP munged is not running"; exit 77; }
        mkdir -p /run/munge && chown munge:munge /run/munge
        runuser -u munge -- /usr/sbin/munged 2>/dev/null
        local t=50
        while [ $t -gt 0 ] && ! munge -n </dev/null >/dev/null 2>&1; do sleep 0.1; t=$((t - 1)); done
        munge -n </dev/null >/dev/null 2>&1 || { echo "1..0 # SKIP cannot start munged"; exit 77; }
    fi
    [ -n "${DT_PATH_NOWRAP:-}" ] || DT_PATH_NOWRAP=$PATH
    realcurl=$(PATH=$DT_PATH_NOWRAP command -v curl)
    mkdir -p "$dir/bin"
    [ -n "${DT_API_VALIDATE:-}" ] && api_validator_start "$dir"
    printf '#!/bin/sh\nDT_API_FIFO=%s DTCURL_CURL=%s exec %s "$@"\n' "$DT_API_FIFO" "$realcurl" \
        "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dtcurl" > "$dir/bin/curl"
    chmod 755 "$dir/bin" "$dir/bin/curl"
    PATH=$dir/bin:$DT_PATH_NOWRAP
    export PATH
}

# The validator: one process (api-validate.py --serve) reads the named
# pipe DIR/api-fifo, whose path the curl wrapper gives dtcurl in
# DT_API_FIFO (not exported: daemons the test starts do not name the
# test's directory in their environment); each line names
# an answer (METHOD PATH STATUS BODYFILE), which it checks against
# schemas/openapi.json, writing mismatches to DIR/api-invalid.  Requests
# the description has no operation for (another server's) are not checked.
# Without python3-jsonschema nothing is checked (a diagnostic says so).
API_VALIDATOR_PID=
API_VALIDATOR_DIR=
api_validator_start () {
    local dir=$1
    [ -z "$API_VALIDATOR_PID" ] || return 0
    if ! python3 -c 'import jsonschema' 2>/dev/null; then
        echo "# python3-jsonschema not installed: answers are not validated"
        return 0
    fi
    mkdir -p "$dir/answers" && mkfifo "$dir/api-fifo" || bail "cannot make $dir/api-fifo"
    chmod 700 "$dir/answers"
    "$DT_PY3" "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/system/api-validate.py" \
        --serve "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/schemas/openapi.json" \
        "$dir/api-fifo" "$dir/api-invalid" </dev/null >/dev/null &
    API_VALIDATOR_PID=$!
    API_VALIDATOR_DIR=$dir
    DT_API_FIFO=$dir/api-fifo
    TAP_FINISH_HOOK=api_validator_finish
}
# Let the validator finish what it was given, wait for it, and turn its
# findings into one test point.
api_validator_finish () {
    [ -n "$API_VALIDATOR_PID" ] || return 0
    kill -0 "$API_VALIDATOR_PID" 2>/dev/null && echo STOP 1<>"$API_VALIDATOR_DIR/api-fifo"
    wait "$API_VALIDATOR_PID" 2>/dev/null
    API_VALIDATOR_PID=
    check "every answer of the controller matches schemas/openapi.json" \
        test ! -s "$API_VALIDATOR_DIR/api-invalid"
    [ -s "$API_VALIDATOR_DIR/api-invalid" ] && sort -u "$API_VALIDATOR_DIR/api-invalid" | head -40 | diag
    return 0
}
api_validator_kill () {
    [ -n "$API_VALIDATOR_PID" ] && kill "$API_VALIDATOR_PID" 2>/dev/null
    for p in $API_PROXY_PIDS; do kill "$p" 2>/dev/null; done
    return 0
}
# api_proxy UPSTREAM: sets API_PROXY_URL to a proxy in front of UPSTREAM
# (http://HOST:PORT) that hands every answer it relays to the validator
# (api-proxy.py), for clients other than curl (dtctl, dtagent); the
# requests it relayed are in $API_VALIDATOR_DIR/proxy-N.log.  Without a
# validator, API_PROXY_URL is UPSTREAM itself.
API_PROXY_PIDS=
api_proxy () {
    API_PROXY_URL=$1
    [ -n "$API_VALIDATOR_PID" ] || return 0
    local k=$(( $(echo $API_PROXY_PIDS | wc -w) + 1 )) d=$API_VALIDATOR_DIR
    "$DT_PY3" "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/api-proxy.py" "$d/proxy-$k.port" "$1" \
        "$d/api-fifo" >"$d/proxy-$k.log" 2>&1 </dev/null &
    API_PROXY_PIDS="$API_PROXY_PIDS $!"
    local t=100
    while [ $t -gt 0 ] && [ ! -s "$d/proxy-$k.port" ]; do sleep 0.1; t=$((t - 1)); done
    [ -s "$d/proxy-$k.port" ] || bail "the answers' proxy in front of $1 did not start"
    API_PROXY_URL=http://127.0.0.1:$(cat "$d/proxy-$k.port")
}
