# bench_recovery.sh: part 2 (failure detection and recovery on the Slurm
# testbed) and part 7 (the recovery plot).  Sourced by bench/run.
part_recovery () { note recovery "not written yet"; }
