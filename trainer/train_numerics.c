/* train_numerics.c: what this rank computes with (its numerics identity),
 * reported to the controller once at start and kept in the run's result.
 *
 * A run resumed from a checkpoint ends with the parameters of an
 * uninterrupted one only while every attempt computes with the same
 * kernels: on a CPU the BLAS library, its version and the core type whose
 * kernels OpenBLAS picked (Haswell's and Cooperlake's give different
 * last bits on the same CPU), and its threads; on a GPU the device, its
 * compute capability, the CUDA driver and runtime, cuBLAS and NCCL.  The
 * precision and the attention kernel are dttrain's own choices.
 * "pin_env" names the variables that make a later attempt pick the same
 * BLAS kernels: the controller sets them for every later attempt
 * (dtctl-job(5), NUMERICS). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/client/dtclient.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "trainer/train_int.h"

/* An environment value fit for a JSON string as is (OpenBLAS's settings
 * are words and numbers): else left out. */
static const char *plain_env (const char *name)
{
    const char *v = getenv (name);
    if (!v || !*v || strlen (v) > 64)
        return NULL;
    for (const char *c = v; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            return NULL;
    return v;
}

int train_numerics_json (struct trainer *t, char *buf, size_t len)
{
    char dev[768] = "";
    const char *l2 = plain_env ("OPENBLAS_L2_SIZE");
    int nccl = t->k->is_device ? dt_comm_nccl_version () : -1;
    int n;

    if (t->k->is_device) {
        if (dt_kern_cuda_identity (dev, sizeof (dev)) < 0)
            snprintf (dev, sizeof (dev), "\"device\": \"cuda\"");
    }
    else if (dt_kern_cpu_identity (dev, sizeof (dev)) < 0)
        return -1;
    n = snprintf (buf, len,
                  "{\"trainer\": \"dttrain\", \"backend\": \"%s\", %s, "
                  "\"precision\": \"%s\", \"attention\": \"%s\"",
                  t->k->name, dev, t->o.precision == PREC_BF16 ? "bf16" : "fp32",
                  t->model.kind != MODEL_TRANSFORMER ? "none"
                  : t->model.flash                   ? "flash"
                                                     : "simple");
    if (n > 0 && (size_t)n < len && nccl > 0)
        n += snprintf (buf + n, len - n, ", \"nccl\": \"%d.%d.%d\"", nccl / 10000,
                       nccl / 100 % 100, nccl % 100);
    /* the CPU kernels are chosen by the environment: pin them */
    if (n > 0 && (size_t)n < len && !t->k->is_device)
        n += snprintf (buf + n, len - n,
                       ", \"pin_env\": {\"OPENBLAS_CORETYPE\": \"%s\"%s%s%s}}",
                       dt_kern_cpu_corename (), l2 ? ", \"OPENBLAS_L2_SIZE\": \"" : "",
                       l2 ? l2 : "", l2 ? "\"" : "");
    else if (n > 0 && (size_t)n < len)
        n += snprintf (buf + n, len - n, ", \"pin_env\": {}}");
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

void train_numerics_report (struct trainer *t)
{
    char json[1024];

    if (!dtclient_connected (t->client))
        return;
    if (train_numerics_json (t, json, sizeof (json)) < 0) {
        dt_log (LOG_WARNING, "rank %d: numerics identity too long: not reported",
                t->rank);
        return;
    }
    dtclient_err_t e = dtclient_numerics (t->client, json);
    if (e != DTCLIENT_OK && t->rank == 0)
        dt_log (LOG_WARNING, "rank %d: numerics not taken: %s", t->rank,
                dtclient_strerror (e));
}
