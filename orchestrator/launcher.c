/* launcher.c: the table of launchers. */
#include <config.h>
#include <errno.h>
#include <string.h>
#include "orchestrator/launcher.h"

const struct launcher_ops *launcher_lookup (const char *name)
{
    if (name && !strcmp (name, "local"))
        return &launcher_local_ops;
    if (name && !strcmp (name, "slurm"))
        return &launcher_slurm_ops;
    if (name && !strcmp (name, "external"))
        return &launcher_external_ops;
    errno = ENOENT;
    return NULL;
}
