#!/bin/sh
# san-run.sh: runs one unit test program (LOG_COMPILER of tests/unit).
#
# In a --enable-sanitizers build (DT_SANITIZED non-empty) the test runs with
# ASan's fast unwinder, which follows frame pointers: a malloc stack costs
# little, where the full unwinder costs milliseconds per allocation (tens
# of seconds for a test that builds 100,000 JSON rows).  It detects exactly
# the same errors and leaks; only stacks through libraries built without
# frame pointers (jansson) come out short.  So when such a test fails, it
# runs once more with the full unwinder, and that run's report (complete
# stacks) follows the first in the log; the first run's status counts.
"$@"
rc=$?
case $rc in 0 | 77) exit $rc ;; esac
if [ -n "${DT_SANITIZED:-}" ]; then
    echo "san-run.sh: exit $rc; once more with full malloc stacks (fast_unwind_on_malloc=0):"
    ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 "$@"
fi
exit $rc
