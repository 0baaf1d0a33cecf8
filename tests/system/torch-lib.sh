# torch-lib.sh: helpers of the tests of dtclient.torch (PyTorch DDP trainers
# under dtctl): the example trainer examples/pytorch/gpt_train.py on the
# project's documentation, its job spec, and an uninterrupted run.  Source
# it after ft-lib.sh or ft-slurm-lib.sh (submit, wait_step, timeline, ...).
# Debian's torch is only visible to /usr/bin/python3.
TORCH_PY=/usr/bin/python3
$TORCH_PY -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null \
    || skip_all "no torch.distributed with gloo for $TORCH_PY (apt-get install python3-torch)"
TORCH_TRAIN=$TOP_SRCDIR/examples/pytorch/gpt_train.py
TORCH_PYPATH=$TOP_SRCDIR/agent/client/python
TORCH_LIBDIR=$TOP_BUILDDIR/agent/client/.libs
TORCH_CORPUS=$TMP/docs.txt
cat "$TOP_SRCDIR/README.md" "$TOP_SRCDIR"/man/*.in > "$TORCH_CORPUS"
chmod 644 "$TORCH_CORPUS"
: "${TORCH_STEPS:=120}"
# A small model: ~20 ms steps on one CPU thread; --sleep-ms makes steps
# long enough to be hit mid-run on a loaded machine (it changes nothing
# in the parameters).
TORCH_ARGS="--data $TORCH_CORPUS --steps $TORCH_STEPS --batch 4 --context 16 --width 32 --layers 2"

# torch_spec NAME NODES 'extra args' [jq-merge-object]: the job spec, one
# rank per node, checkpoints every 20 steps.
torch_spec () {
    local name=$1 nodes=$2 extra=$3 merge=${4:-'{}'}
    jq -n --arg n "$name" --argjson nodes "$nodes" --arg py "$TORCH_PY" --arg t "$TORCH_TRAIN" \
        --arg a "$TORCH_ARGS $extra" --arg pp "$TORCH_PYPATH" --arg ld "$TORCH_LIBDIR" \
        --arg c "$TMP/ckpt" --arg w "${FT_WORKDIR:-}" --argjson m "$merge" '({
        name: $n, nodes: $nodes, ranks_per_node: 1,
        command: ([$py, $t] + ($a | split(" ") | map(select(. != "")))),
        env: {PYTHONPATH: $pp, LD_LIBRARY_PATH: $ld, OMP_NUM_THREADS: "1"},
        checkpoint: {dir: $c, every_steps: 20, keep: 3},
        restart: {max_restarts: 3},
        heartbeat: {interval_ms: 200}} + (if $w != "" then {workdir: $w} else {} end)) * $m'
}

# torch_baseline W: params_sha256 of an uninterrupted run without an agent
# (W processes, gloo on 127.0.0.1).  The master's port is outside the
# ephemeral range (dt_port): a rank dialling it before rank 0 listens
# cannot connect to itself.  A second try if the first fails (the free
# port it picked may have been taken meanwhile); the errors go to
# standard error as TAP comments.
torch_baseline () {
    torch_baseline_try "$1" || torch_baseline_try "$1"
}
torch_baseline_try () {
    local W=$1 r port pids="" rc=0
    port=$(dt_port 127.0.0.1) || return 1
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            PYTHONPATH=$TORCH_PYPATH LD_LIBRARY_PATH=$TORCH_LIBDIR OMP_NUM_THREADS=1 \
            $TORCH_PY "$TORCH_TRAIN" $TORCH_ARGS > "$TMP/tbase.$r.out" 2> "$TMP/tbase.$r.err" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p" || rc=1; done
    if [ $rc != 0 ]; then
        tail -n 5 "$TMP"/tbase.*.err | sed 's/^/# baseline: /' >&2
        return 1
    fi
    jq -r .params_sha256 < <(tail -n 1 "$TMP/tbase.0.out")
}

# torch_trainers_left: processes of this test's PyTorch trainers.
torch_trainers_left () { pgrep -f -- "$TORCH_CORPUS" 2>/dev/null; }
