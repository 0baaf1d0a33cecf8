#!/bin/bash
# t0774-slurm-attack-fs (Slurm testbed): t0773's attacks on the
# controller's file system work, by an ordinary user (dtalice, through
# MUNGE) whose trainer runs under Slurm on a testbed node:
#   - root's files reported as the trainer's shard (directly and through
#     ".."), then exit 1: refused with shard_refused events naming them, no
#     shard row, and the restart's partial-checkpoint cleanup leaves root's
#     files alone;
#   - links to root's files in the user's checkpoint directory (the
#     manifest's temporary name, jit-* and .partial-step-* entries): root's
#     files unchanged, the manifest written with the user's rights;
#   - a FIFO and a root-only file named in the command: not hashed (the
#     refusal recorded), no hash of the root-only file anywhere.
# Needs ordinary users' jobs on Slurm (ft-slurm-lib.sh's DT_SUBMIT_USER).
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
type ft_check_user >/dev/null 2>&1 \
    || skip_all "ordinary users' jobs cannot run on Slurm in this tree (no DT_SUBMIT_USER support)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3 (the user's trainer)"
U=$DT_SUBMIT_USER
sq () { sqlite3 "$TMP/state/dtctld.db" "$1"; }

# ---- root's files the user must not be able to touch ---------------------
V=$TMP/victims
mkdir -p "$V/rootdir"
for f in shard manifest jit; do echo "root's $f file" > "$V/$f"; done
echo "root's file in root's directory" > "$V/rootdir/keep"
echo "root only" > "$V/rootonly"; chmod 600 "$V/rootonly"
mkfifo -m 644 "$V/fifo"
sums () { (cd "$V" && sha256sum shard manifest jit rootdir/keep rootonly; stat -c '%n %u %a' shard manifest jit rootdir rootdir/keep rootonly fifo); }
sums > "$TMP/before"

ft_slurm_up 1
spec=$(jq -n --arg py "$PY" --arg t "$TOP_SRCDIR/tests/system/data/attack_fs_train.py" \
    --arg v "$V" --arg pp "$TOP_SRCDIR/agent/client/python" --arg w "$FT_WORKDIR" '{
  name: "attack-fs", nodes: 1, ranks_per_node: 2, workdir: $w,
  command: [$py, $t, "\($v)/shard", "\($v)/manifest", "\($v)/jit", "\($v)/rootdir",
            "\($v)/fifo", "--data=\($v)/rootonly"],
  env: {PYTHONPATH: $pp},
  checkpoint: {every_steps: 0, keep: 1},
  restart: {max_restarts: 1, exclude_failed_nodes: false},
  heartbeat: {interval_ms: 250, node_timeout_ms: 10000, hang_timeout_ms: 30000}}')
submit "$spec" || bail "submit failed"
check "the job ended" wait_for 120 sh -c "sqlite3 '$TMP/state/dtctld.db' \"SELECT state FROM jobs WHERE id = $ID\" | grep -Eq '^(completed|failed|cancelled)$'"
ft_check_user "$ID" "$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')"
check "it completed in attempt 2 (attempt 1 failed on purpose)" \
    test "$(sq "SELECT state || ' ' || attempts FROM jobs WHERE id = $ID")" = "completed 2"
sq "SELECT kind, detail FROM events WHERE job_id = $ID ORDER BY id" | sed 's/^/# /'

check "root's file reported as a shard: refused, with an event naming it" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shard_refused'
                AND json_extract(data, '\$.path') = '$V/shard' AND detail LIKE '%$V/shard%'")" = 1
check "the '..' path too" \
    test "$(sq "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shard_refused'
                AND json_extract(data, '\$.path') LIKE '%/step-2/../../../shard'")" = 1
check "no shard row outside the job's checkpoint directory" \
    test "$(sq "SELECT count(*) FROM checkpoint_shards WHERE job_id = $ID
                AND path NOT LIKE '$TMP/ckpt/$ID/step-%/rank-%.ckpt'")" = 0
check "step 1 was committed, no checkpoint of step 2" \
    test "$(sq "SELECT group_concat(step || ' ' || state) FROM checkpoints WHERE job_id = $ID")" = "1 committed"

CK=$TMP/ckpt/$ID
check "the job's checkpoint directory is the user's, mode 700" \
    test "$(stat -c '%U %a' "$CK")" = "$U 700"
check "manifest.json of step 1 is a file written with the user's rights" \
    eval 'test -f "$CK/step-1/manifest.json" -a ! -L "$CK/step-1/manifest.json" && test "$(stat -c %U "$CK/step-1/manifest.json")" = "$U"'
check "the jit-* entries were removed, never followed" \
    eval '! test -e "$CK/jit-9-r0" -o -L "$CK/jit-9-r0" -o -e "$CK/jit-8-r0"'
sums > "$TMP/after"
check "root's files: unchanged (contents, owners, modes)" cmp -s "$TMP/before" "$TMP/after"
diff "$TMP/before" "$TMP/after" | sed 's/^/# /'

PROV=$(sq "SELECT provenance FROM attempts WHERE job_id = $ID AND attempt = 1")
check "provenance: hashed as the user" \
    jqt --argjson u "$(id -u "$U")" '.hashing.state == "done" and .hashing.as_uid == $u' <<<"$PROV"
check "provenance: the FIFO and the root-only file are recorded, not hashed" \
    jqt --arg f "$V/fifo" --arg r "$V/rootonly" '([.files[] | select(.path == $f or .path == $r) | select(.sha256 == null and (.error | length) > 0)] | length) == 2' <<<"$PROV"
check "no hash of the root-only file anywhere in the database" \
    test "$(sq "SELECT count(*) FROM attempts WHERE provenance LIKE '%$(sha256sum < "$V/rootonly" | cut -d' ' -f1)%'")" = 0
check "no trainer left on the node" wait_for 20 eval '! pgrep -f attack_fs_train.py >/dev/null'
done_testing
