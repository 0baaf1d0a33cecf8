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
munge_setup () {
    local dir=$1 realcurl
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
    printf '#!/bin/sh\nDTCURL_CURL=%s exec %s "$@"\n' "$realcurl" \
        "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dtcurl" > "$dir/bin/curl"
    chmod 755 "$dir/bin" "$dir/bin/curl"
    PATH=$dir/bin:$DT_PATH_NOWRAP
    export PATH
}
