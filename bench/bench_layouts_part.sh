# bench_layouts_part.sh: bench/run's part "layouts" (sourced): runs
# bench/bench_layouts.sh (tokens/s per layout at 1, 2, 4, 8 ranks, the
# pipeline bubble against (P-1)/(M+P-1), exposed communication before and
# after overlap, dp against PyTorch DDP), which writes layouts.md and
# layouts.json into the results directory; its key figures become samples
# of the summary.
part_layouts () {
    say "layouts: dttrain's tp/pp/dp layouts (bench_layouts.sh, $REPS repetitions)"
    local d=$TMP/layouts
    mkdir -p "$d" "$OUT"
    if ! REPS=$REPS LAYOUTS_OUT=$OUT LAYOUTS_REC=$d/rec.txt "$SRC/bench/bench_layouts.sh" "$B" \
        > "$d/out.txt" 2>&1; then
        note layouts "bench_layouts.sh failed: $(tail -n 2 "$d/out.txt" | tr '\n' ' ')"
        return
    fi
    local k v
    while read -r k v; do rec "$k" "$v"; done < "$d/rec.txt"
    note layouts "tables in $OUT/layouts.md (tokens/s per layout at 1, 2, 4, 8 ranks on $(getconf _NPROCESSORS_ONLN) cores: ranks beyond the cores share them)"
}
