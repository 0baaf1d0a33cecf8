/* comm_nccl_none.c: stands in for comm_nccl.c in a build without CUDA. */
#include "config.h"

#include <errno.h>

#include "trainer/comm.h"

dt_comm_t *dt_comm_nccl_create (const struct dt_comm_params *p, dt_error_t *err)
{
    errnoprintf (err, ENOTSUP, "NCCL not built (configure --with-cuda)");
    return NULL;
}

dt_comm_t *dt_comm_nccl_split (dt_comm_t *parent, int color, int key, const int *members,
                               int size, int p2p, dt_error_t *err)
{
    errnoprintf (err, ENOTSUP, "NCCL not built (configure --with-cuda)");
    return NULL;
}

int dt_comm_nccl_allreduce_start (dt_comm_t *c, float *buf, size_t n, dt_error_t *err)
{
    return errnoprintf (err, ENOTSUP, "NCCL not built (configure --with-cuda)");
}

int dt_comm_nccl_wait (dt_comm_t *c, dt_error_t *err)
{
    return errnoprintf (err, ENOTSUP, "NCCL not built (configure --with-cuda)");
}

int dt_comm_nccl_version (void)
{
    return -1;
}
