/* slurm-launch-drive-launcher.c: the Slurm launcher compiled into the test
 * driver (slurm-launch-drive), so it is tested without dtctld. */
#include "orchestrator/launcher_slurm.c"
#include "orchestrator/slurm_script.c"
#include "orchestrator/slurm_watch.c"
#include "orchestrator/slurm_alloc.c"
