#!/bin/bash
# t0773-attack-fs: an ordinary user's attacks on the controller's file
# system work, against the real dtctld (root, local launcher: agents and
# trainers run as the job's user) with MUNGE authentication:
#   - a trainer reports root's files as its checkpoint shard (directly, and
#     through "..") and exits 1: the reports are refused with a
#     shard_refused event naming the path, no shard row is stored, and the
#     partial-checkpoint cleanup of the restart leaves root's files alone;
#   - links to root's files in the user's own checkpoint directory (a
#     .manifest.json.tmp where the controller writes the manifest, jit-*
#     and .partial-step-* entries it removes): root's files are unchanged;
#   - the command names a FIFO and a root-only file: the controller keeps
#     answering, both are recorded as not hashed, no hash of the root-only
#     file appears;
#   - a shard header announcing UINT64_MAX bytes of config (dttrain, run
#     as the user): a clean error naming the shard, exit 3;
#   - another user's directories planted at the next job ids in a shared
#     (sticky, world-writable) checkpoint root: the job's attempt fails
#     before any trainer starts, naming the directory, and nothing is
#     written there; dttrain refuses such a DT_CHECKPOINT_DIR itself.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
DTTRAIN=$TOP_BUILDDIR/trainer/dttrain
PY=/usr/bin/python3
[ -x "$DTCTL" ] || skip_all "$DTCTL not built"
[ -x "$PY" ] || skip_all "no /usr/bin/python3 (the user's trainer)"
dt_users_setup
U=$DT_USER_A

started_munged=
cleanup () {
    ctld_cleanup
    [ -n "$started_munged" ] && kill "$started_munged" 2>/dev/null
}
trap cleanup EXIT
if ! munge -n </dev/null >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged || skip_all "cannot start munged"
    started_munged=$(cat /run/munge/munged.pid 2>/dev/null)
    wait_for 5 sh -c 'munge -n </dev/null >/dev/null 2>&1' || bail "munged did not come up"
fi

# ---- root's files the user must not be able to touch ---------------------
V=$TMP/victims
mkdir -p "$V/rootdir"
for f in shard manifest jit; do echo "root's $f file" > "$V/$f"; done
echo "root's file in root's directory" > "$V/rootdir/keep"
echo "root only" > "$V/rootonly"; chmod 600 "$V/rootonly"
mkfifo -m 644 "$V/fifo"
sums () { (cd "$V" && sha256sum shard manifest jit rootdir/keep rootonly; stat -c '%n %u %a' shard manifest jit rootdir rootdir/keep rootonly fifo); }
sums > "$TMP/before"

mkdir -p "$TMP/work"; chmod 1777 "$TMP/work"
# CheckpointRoot must be a normal path (jobs' checkpoint.dir is compared with it).
write_conf
sed -i "s|^CheckpointRoot=.*|CheckpointRoot=$TMP/ckpt/|" "$TMP/dtctld.conf"
out=$("$DTCTLD" -c "$TMP/dtctld.conf" 2>&1); rc=$?
check "CheckpointRoot with a trailing '/': dtctld refuses to start, naming it" \
    eval '[ $rc -ne 0 ] && grep -q "CheckpointRoot: .* is not a normal path" <<<"$out"'
write_conf "LogLevel=debug"
sed -i 's/^AuthType=none$/AuthType=munge/' "$TMP/dtctld.conf"
start_fg || { sed 's/^/# /' "$TMP/ctld.log"; bail "dtctld did not come up"; }
DB=$TMP/state/dtctld.db
sq () { sqlite3 "$DB" "$1"; }

# ---- the attacking job, submitted by the user through MUNGE --------------
jq -n --arg py "$PY" --arg t "$TOP_SRCDIR/tests/system/data/attack_fs_train.py" \
    --arg v "$V" --arg pp "$TOP_SRCDIR/agent/client/python" --arg w "$TMP/work" '{
  name: "attack-fs", nodes: 1, ranks_per_node: 2, workdir: $w,
  command: [$py, $t, "\($v)/shard", "\($v)/manifest", "\($v)/jit", "\($v)/rootdir",
            "\($v)/fifo", "--data=\($v)/rootonly"],
  env: {PYTHONPATH: $pp},
  checkpoint: {every_steps: 0, keep: 1},
  restart: {max_restarts: 1},
  heartbeat: {interval_ms: 200, node_timeout_ms: 10000, hang_timeout_ms: 30000}}' > "$TMP/work/job.json"
chmod 644 "$TMP/work/job.json"
ID=$(cd "$TMP/work" && as_user "$U" "$DTCTL" --controller "$URL" submit "$TMP/work/job.json" 2>"$TMP/err")
check "$U submits the job through MUNGE" eval '[[ "$ID" =~ ^[0-9]+$ ]]' || sed 's/^/# /' "$TMP/err"
check "the job belongs to $U" test "$(sq "SELECT uid FROM jobs WHERE id = ${ID:-0}")" = "$(user_uid "$U")"

# A checkpoint.dir that is not a normal path: refused at submission.
jq '.checkpoint.dir = "/tmp/x/../../etc"' "$TMP/work/job.json" > "$TMP/work/bad.json"
chmod 644 "$TMP/work/bad.json"
as_user "$U" "$DTCTL" --controller "$URL" submit "$TMP/work/bad.json" >/dev/null 2>"$TMP/err"; rc=$?
check "checkpoint.dir with '..': submission refused, naming the field" \
    eval '[ $rc -eq 1 ] && grep -q "checkpoint.dir: must not contain" "$TMP/err"' || sed 's/^/# /' "$TMP/err"

# The controller answers while it hashes the command's files (a FIFO among them).
check "dtctld answers /healthz at once" curl -sf --max-time 5 -o /dev/null "$URL/healthz"

ended () { case $(sq "SELECT state FROM jobs WHERE id = $ID") in completed|failed|cancelled) return 0;; esac; return 1; }
check "the job ended" wait_for 90 ended
check "it completed in attempt 2 (attempt 1 failed on purpose)" \
    test "$(sq "SELECT state || ' ' || attempts FROM jobs WHERE id = $ID")" = "completed 2"
sq "SELECT kind, detail FROM events WHERE job_id = $ID ORDER BY id" | sed 's/^/# /'

# ---- forged shard paths ----------------------------------------------------
check "root's file reported as a shard: refused, with an event naming it" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shard_refused'
                AND json_extract(data, '\$.path') = '$V/shard' AND detail LIKE '%$V/shard%'")" = 1
check "the '..' path too" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shard_refused'
                AND json_extract(data, '\$.path') LIKE '%/step-2/../../../shard'")" = 1
check "no shard row outside the job's checkpoint directory" \
    test "$(sq "SELECT count(*) FROM checkpoint_shards WHERE job_id = $ID
                AND path NOT LIKE '$TMP/ckpt/$ID/step-%/rank-%.ckpt'")" = 0
check "no checkpoint of step 2 at all" \
    test "$(sq "SELECT count(*) FROM checkpoints WHERE job_id = $ID AND step = 2")" = 0
check "step 1 was committed (the manifest written over the planted link)" \
    test "$(sq "SELECT state FROM checkpoints WHERE job_id = $ID AND step = 1")" = committed

# ---- links in the user's checkpoint directory ------------------------------
CK=$TMP/ckpt/$ID
check "the job's checkpoint directory is the user's, mode 700" \
    test "$(stat -c '%U %a' "$CK")" = "$U 700"
check "manifest.json of step 1 is a file written with the user's rights" \
    eval 'test -f "$CK/step-1/manifest.json" -a ! -L "$CK/step-1/manifest.json" && test "$(stat -c %U "$CK/step-1/manifest.json")" = "$U" && jqt ".step == 1" "$CK/step-1/manifest.json"'
check "the jit-* entries were removed, never followed" \
    eval '! test -e "$CK/jit-9-r0" -o -L "$CK/jit-9-r0" -o -e "$CK/jit-8-r0"'
# A checkpoint.dir where the user may not create directories (root's):
# nothing is created there, and the job's events say why.
jq -n --arg d "$V/elsewhere" --arg w "$TMP/work" '{name: "elsewhere", nodes: 1, workdir: $w,
  command: ["/bin/true"], checkpoint: {dir: $d}, restart: {max_restarts: 0}}' > "$TMP/work/else.json"
chmod 644 "$TMP/work/else.json"
ID2=$(as_user "$U" "$DTCTL" --controller "$URL" submit "$TMP/work/else.json" 2>"$TMP/err")
ended2 () { case $(sq "SELECT state FROM jobs WHERE id = ${ID2:-0}") in completed|failed|cancelled) return 0;; esac; return 1; }
check "a job naming root's directory as checkpoint.dir runs and ends" wait_for 60 ended2
check "its events say the checkpoint directory could not be made (permission denied)" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = ${ID2:-0} AND kind = 'checkpoint_dir_failed'
                AND detail LIKE '%$V/elsewhere%Permission denied%'")" = 1
check "nothing was created in root's directory" test ! -e "$V/elsewhere"

sums > "$TMP/after"
check "root's files: unchanged (contents, owners, modes)" cmp -s "$TMP/before" "$TMP/after" \
    || diff "$TMP/before" "$TMP/after" | sed 's/^/# /'

# ---- provenance: FIFO and root-only file ------------------------------------
PROV=$(sq "SELECT provenance FROM attempts WHERE job_id = $ID AND attempt = 1")
check "provenance: hashed as the user, off the loop" \
    jqt --argjson u "$(user_uid "$U")" '.hashing.state == "done" and .hashing.as_uid == $u' <<<"$PROV"
check "provenance: the FIFO is recorded as not hashed" \
    jqt --arg p "$V/fifo" '[.files[] | select(.path == $p)] | length == 1 and (.[0].error | test("not a regular file")) and (.[0].sha256 == null)' <<<"$PROV"
check "provenance: the root-only file is refused (no hash of it)" \
    jqt --arg p "$V/rootonly" '[.files[] | select(.path == $p)] | length == 1 and .[0].error == "Permission denied" and .[0].sha256 == null' <<<"$PROV"
check "provenance: the user's own script is hashed" \
    jqt '.script.sha256 | length == 64' <<<"$PROV"
check "no hash of the root-only file anywhere in the database" \
    test "$(sq "SELECT count(*) FROM attempts WHERE provenance LIKE '%$(sha256sum < "$V/rootonly" | cut -d' ' -f1)%'")" = 0

# ---- a shard header with a huge config size (dttrain, as the user) ---------
if [ -x "$DTTRAIN" ]; then
    D=$TMP/work/dt; as_user "$U" mkdir -p "$D"
    cat "$TOP_SRCDIR"/man/*.in > "$D/corpus.txt"
    targs=(--data "$D/corpus.txt" --global-batch 8 --context 8 --width 16 --heads 2 --layers 1 --checkpoint-every 10)
    as_user "$U" env RANK=0 WORLD_SIZE=1 "$DTTRAIN" "${targs[@]}" --steps 10 --checkpoint-dir "$D/ck" >/dev/null 2>&1
    "$PY" - "$D/ck/step-10/rank-0.ckpt" <<'PYEOF'
import struct, sys
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
CONFIG_BYTES_AT, HDR_CRC_AT = 80, 216        # trainer/ckpt.c struct ckpt_hdr
with open(sys.argv[1], "r+b") as f:
    h = bytearray(f.read(HDR_CRC_AT + 4))
    assert struct.unpack_from("<I", h, HDR_CRC_AT)[0] == crc32c(bytes(h[:HDR_CRC_AT]))
    struct.pack_into("<Q", h, CONFIG_BYTES_AT, 2**64 - 1)
    struct.pack_into("<I", h, HDR_CRC_AT, crc32c(bytes(h[:HDR_CRC_AT])))
    f.seek(0)
    f.write(h)
PYEOF
    as_user "$U" env RANK=0 WORLD_SIZE=1 "$DTTRAIN" "${targs[@]}" --steps 12 \
        --checkpoint-dir "$D/ck2" --resume "$D/ck/step-10" >/dev/null 2>"$TMP/huge.err"; rc=$?
    check "huge config size in a shard header: exit 3, the shard named" \
        eval '[ $rc -eq 3 ] && grep -q "rank-0.ckpt: header announces 18446744073709551615 bytes of config" "$TMP/huge.err"' \
        || sed 's/^/# /' "$TMP/huge.err"
fi

# ---- a job directory planted in the shared checkpoint root ---------------
# CheckpointRoot writable by all, sticky (as dtctld.conf(5) allows): dtbob
# makes the next job ids' directories first, open to all.  dtalice's job
# must not write its shards there: its attempt fails before any trainer
# starts, naming the directory, and dtbob's directories stay empty.
B=$DT_USER_B
mkdir -p "$TMP/ckpt" && chmod 1777 "$TMP/ckpt"
LAST=$(sq "SELECT max(id) FROM jobs")
for j in $((LAST + 1)) $((LAST + 2)); do as_user "$B" mkdir -m 0777 "$TMP/ckpt/$j"; done
# (a job that runs and checkpoints: on a controller that let it start, its
# shards would land in dtbob's directory)
jq -n --arg t "$DTTRAIN" --arg w "$TMP/work" --arg d "$TOP_SRCDIR/README.md" '{name: "planted",
  nodes: 1, ranks_per_node: 1, workdir: $w,
  command: [$t, "--data", $d, "--steps", "20", "--global-batch", "8", "--context", "8",
            "--width", "16", "--heads", "2", "--layers", "1"],
  checkpoint: {every_steps: 5}, restart: {max_restarts: 0}}' > "$TMP/work/planted.json"
chmod 644 "$TMP/work/planted.json"
PID_=$(cd "$TMP/work" && as_user "$U" "$DTCTL" --controller "$URL" submit "$TMP/work/planted.json" 2>"$TMP/err")
check "$U submits a job (id $PID_; $B planted $TMP/ckpt/$PID_)" test "$PID_" = $((LAST + 1))
planted_failed () {
    [ "$(sq "SELECT cause || ' ' || (detail LIKE '%ckpt/$PID_%') FROM attempts WHERE job_id = ${PID_:-0}")" = "launch_failed 1" ]
}
check "its attempt fails before a trainer starts: launch_failed, naming the directory" \
    wait_for 30 planted_failed
check "the job fails" wait_for 30 eval '[ "$(sq "SELECT state FROM jobs WHERE id = ${PID_:-0}")" = failed ]'
check "nothing was written into $B's directory" test -z "$(ls -A "$TMP/ckpt/$((LAST + 1))")"
check "a checkpoint_dir_failed event says why" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = ${PID_:-0} AND kind = 'checkpoint_dir_failed' AND detail LIKE '%Operation not permitted%'")" = 1
# dttrain itself refuses another user's directory as DT_CHECKPOINT_DIR.
as_user "$U" env RANK=0 WORLD_SIZE=1 DT_CHECKPOINT_DIR="$TMP/ckpt/$((LAST + 2))" "$DTTRAIN" \
    --data "$TOP_SRCDIR/README.md" --steps 2 >/dev/null 2>"$TMP/dtc.err"; rc=$?
check "dttrain refuses a DT_CHECKPOINT_DIR of another user's (exit 2, naming it)" \
    eval '[ $rc -eq 2 ] && grep -q "is a directory of uid $(id -u "$B"), not a directory of this user" "$TMP/dtc.err"' \
    || sed 's/^/# /' "$TMP/dtc.err"
check "... and writes nothing there" test -z "$(ls -A "$TMP/ckpt/$((LAST + 2))")"

check "dtctld still runs" kill -0 "$CTLD_PID"
done_testing
