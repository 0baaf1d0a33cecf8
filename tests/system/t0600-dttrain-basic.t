#!/bin/bash
# t0600-dttrain-basic: dttrain's command line, and the loss falls on a real
# text file (the repository's man pages, API text and sources) with the
# validation bits per byte reported; the same run twice gives the same bits.
. "$(dirname "$0")/dttrain-lib.sh"

check "--help prints usage and exits 0" sh -c '"$0" --help | grep -q -- "--global-batch"' "$DTTRAIN"
check "--version exits 0" "$DTTRAIN" --version
"$DTTRAIN" --bogus >/dev/null 2>"$TMP/err"; rc=$?
check "unknown option: exit 2" test $rc -eq 2
check "unknown option: message names it" grep -q -- "--bogus" "$TMP/err"
"$DTTRAIN" --data /nonexistent/file 2>"$TMP/err"; rc=$?
check "missing data file: exit 1 naming the file" sh -c "test $rc -eq 1 && grep -q /nonexistent/file $TMP/err"
"$DTTRAIN" --data "$0" --parallel zero2 2>"$TMP/err"; rc=$?
check "bad --parallel: exit 2 naming the value" sh -c "test $rc -eq 2 && grep -q zero2 $TMP/err"
"$DTTRAIN" --data "$0" --backend tpu 2>"$TMP/err"; rc=$?
check "bad --backend: error naming it" sh -c "test $rc -ne 0 && grep -q tpu $TMP/err"

data=$(corpus)
# Default model; 150 steps, validation every 50.
RANK=0 WORLD_SIZE=1 "$DTTRAIN" --data "$data" --steps 150 --val-every 50 \
    >"$TMP/a.out" 2>"$TMP/a.err"; rc=$?
check "150 steps on the corpus exit 0" test $rc -eq 0
first=$(sed -n 's/.*step 50 val loss [0-9.]* (\([0-9.]*\) bits\/byte).*/\1/p' "$TMP/a.err")
last=$($PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["val_bpb"])' "$TMP/a.out")
echo "# val bits/byte: step 50 $first, step 150 $last (uniform = 8)"
check "validation bits per byte reported" test -n "$first" -a -n "$last"
check "val bpb falls between step 50 and 150" $PY -c "import sys; sys.exit(0 if $last < $first - 0.1 else 1)"
check "val bpb well below uniform (8)" $PY -c "import sys; sys.exit(0 if $last < 5.5 else 1)"
for k in steps tokens_per_s train_loss val_loss val_bpb params_crc32c; do
    check "summary has $k" grep -q "\"$k\"" "$TMP/a.out"
done

# Determinism: the same run again gives the same parameters, bit for bit.
RANK=0 WORLD_SIZE=1 "$DTTRAIN" --data "$data" --steps 30 --quiet >"$TMP/b1.out" 2>&1
RANK=0 WORLD_SIZE=1 "$DTTRAIN" --data "$data" --steps 30 --quiet >"$TMP/b2.out" 2>&1
c1=$(grep -o '"params_crc32c": "[0-9a-f]*"' "$TMP/b1.out")
c2=$(grep -o '"params_crc32c": "[0-9a-f]*"' "$TMP/b2.out")
check "two identical runs: same params_crc32c ($c1)" test -n "$c1" -a "$c1" = "$c2"
finish
