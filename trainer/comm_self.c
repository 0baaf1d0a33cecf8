/* comm_self.c: the one-rank communicator (no peers, no store): every collective is local.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "trainer/comm.h"

/* Host pointers only; dttrain passes in == out for one rank, so the copies
 * below do not run for device buffers. */
static int s_allreduce (dt_comm_t *c, void *buf, size_t n, enum dt_comm_dtype t,
                        enum dt_comm_op op, dt_error_t *err)
{
    return 0;
}

static int s_reduce_scatter (dt_comm_t *c, float *in, float *out, const size_t *counts,
                             dt_error_t *err)
{
    if (out != in)
        memmove (out, in, counts[0] * sizeof (float));
    return 0;
}

static int s_allgather (dt_comm_t *c, const float *in, float *out, const size_t *counts,
                        dt_error_t *err)
{
    if (out != in)
        memmove (out, in, counts[0] * sizeof (float));
    return 0;
}

static int s_broadcast (dt_comm_t *c, void *buf, size_t bytes, int root, dt_error_t *err)
{
    return 0;
}

static int s_barrier (dt_comm_t *c, dt_error_t *err)
{
    return 0;
}

static void s_destroy (dt_comm_t *c)
{
    free (c);
}

static const struct dt_comm_ops self_ops = {
    "self",      s_allreduce, s_reduce_scatter,
    s_allgather, s_broadcast, s_barrier,
    s_destroy,   NULL,        NULL,
    NULL,        NULL, /* no peers to send to */
    NULL,        NULL,
};

dt_comm_t *dt_comm_self_create (dt_error_t *err)
{
    dt_comm_t *c = calloc (1, sizeof (*c));
    if (!c) {
        errprintf (err, "out of memory");
        return NULL;
    }
    c->ops = &self_ops;
    c->rank = 0;
    c->size = 1;
    return c;
}
