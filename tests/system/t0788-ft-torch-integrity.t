#!/bin/bash
# t0788-ft-torch-integrity (local launcher): silent errors in a PyTorch DDP
# job through dtclient.torch.  The example trainer runs 3 ranks (one per
# node) with integrity.every_steps 5 (DT_INTEGRITY_EVERY) and action
# report; rank 1 gets a bit flip in one parameter before step 7 (first
# attempt only).  Each rank reports its module's fingerprint every 5 steps;
# the controller sees the replicas agree at step 5, records
# replica_divergence at step 10 naming rank 1 on local2 by majority, with
# the differing tensor, and the job runs on to completion.
. "$(dirname "$0")/ft-lib.sh"
TORCH_STEPS=20
. "$(dirname "$0")/torch-lib.sh"
trap 'for p in $(torch_trainers_left); do kill -9 "$p" 2>/dev/null; done; ft_cleanup' EXIT

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
submit "$(torch_spec tinteg 3 "--inject-bitflip 1:7" '{"integrity": {"every_steps": 5, "action": "report"}}')" \
    || bail "submit failed"
check "the job completes" wait_state "$ID" completed 90
api GET "/v1/jobs/$ID/events" > "$TMP/ev.json"
api GET "/v1/jobs/$ID" > "$TMP/job.json"
jq -c '.data[] | select(.kind | test("divergence|integrity")) | [.attempt, .kind, .rank, .node, .detail]' \
    "$TMP/ev.json" | sed 's/^/#   /'
first=$(jq -c '[.data[] | select(.kind == "replica_divergence")][0]' "$TMP/ev.json")
check "replica_divergence at step 10 (not 5): rank 1 on local2 named by majority, group dp" \
    jqt '.rank == 1 and .node == "local2" and .data.step == 10 and .data.group == "dp"
         and (.data.fingerprints | keys) == ["0", "1", "2"]
         and .data.fingerprints["0"] == .data.majority and .data.fingerprints["2"] == .data.majority
         and .data.fingerprints["1"] != .data.majority' <<<"$first"
check "the evidence names the perturbed tensor (the first parameter, tok.weight), no other" \
    jqt '.data.tensors == ["tok.weight"]' <<<"$first"
check "one attempt: action report does not roll back" \
    jqt '(.data.attempts | length) == 1' "$TMP/job.json"
done_testing
