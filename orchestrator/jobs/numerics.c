/* numerics.c: what each attempt's trainers compute with, pinned across the
 * job's attempts (jobs.h, jobs_numerics).
 *
 * A resumed run ends with the parameters of an uninterrupted one only while
 * every attempt computes with the same kernels: a restart on another CPU
 * generation, BLAS build, GPU model or library version continues with
 * other numerics.  Each rank reports its identity once at start
 * (dtclient_numerics: BLAS library, version and core type, threads; on a
 * GPU the device and library versions; precision, kernels).  The first
 * report of the job is its pin: later attempts get its "pin_env" (for
 * OpenBLAS, OPENBLAS_CORETYPE) in their ranks' environment
 * (jobs_numerics_env), whatever the node would pick by itself.  A report
 * that still differs is an event numerics_changed naming what changed; with
 * the spec's numerics "strict" the attempt fails with that cause and the
 * node is excluded (restartpolicy.c).
 *
 * Owns job->numerics and att->numerics; the identity itself lives in the
 * attempts table (store_numerics.c), so a restarted controller pins the
 * same one. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/jobs/internal.h"

static const size_t numerics_max_members = 64;
static const size_t numerics_max_str = 256;
static const size_t pin_env_max = 8;

void numerics_job_free (struct job *job)
{
    json_decref (job->numerics.pin);
    job->numerics.pin = NULL;
}

/* A variable a trainer may ask later attempts to set: the libraries'
 * numerics knobs, never the loader's or the shell's. */
static bool pin_name_ok (const char *k)
{
    static const char *const prefixes[] = { "OPENBLAS_", "OMP_",  "MKL_",
                                            "CUBLAS_",   "NCCL_", NULL };
    size_t n = strlen (k);
    if (n > 64)
        return false;
    for (const char *c = k; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return false;
    for (const char *const *p = prefixes; *p; p++)
        if (!strncmp (k, *p, strlen (*p)) && n > strlen (*p))
            return true;
    return false;
}

static bool plain_value (const char *v)
{
    if (!*v || strlen (v) > 64)
        return false;
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '=')
            return false;
    return true;
}

int jobs_numerics_check (const json_t *n, const char *path, dt_error_t *err)
{
    const char *k;
    json_t *v;

    if (!json_is_object (n))
        return errnoprintf (err, EINVAL, "%s.numerics: expected object", path);
    if (json_object_size (n) > numerics_max_members)
        return errnoprintf (err, EINVAL, "%s.numerics: more than %zu members", path,
                            numerics_max_members);
    json_object_foreach ((json_t *)n, k, v)
    {
        if (strlen (k) > 64)
            return errnoprintf (err, EINVAL, "%s.numerics: a member name over 64 bytes",
                                path);
        if (!strcmp (k, "pin_env")) {
            const char *ek;
            json_t *ev;
            if (!json_is_object (v) || json_object_size (v) > pin_env_max)
                return errnoprintf (err, EINVAL,
                                    "%s.numerics.pin_env: expected an object of at most "
                                    "%zu variables",
                                    path, pin_env_max);
            json_object_foreach (v, ek, ev)
            {
                if (!pin_name_ok (ek))
                    return errnoprintf (err, EINVAL,
                                        "%s.numerics.pin_env.%.64s: only OPENBLAS_*, "
                                        "OMP_*, MKL_*, CUBLAS_* and NCCL_* variables",
                                        path, ek);
                if (!json_is_string (ev) || !plain_value (json_string_value (ev)))
                    return errnoprintf (err, EINVAL,
                                        "%s.numerics.pin_env.%s: expected a plain "
                                        "string of 1-64 characters",
                                        path, ek);
            }
            continue;
        }
        if (json_is_string (v)
              ? strlen (json_string_value (v)) > numerics_max_str
              : !(json_is_number (v) || json_is_boolean (v) || json_is_null (v)))
            return errnoprintf (err, EINVAL,
                                "%s.numerics.%s: expected a string of at most %zu "
                                "bytes, a number, a boolean or null",
                                path, k, numerics_max_str);
    }
    return 0;
}

/* The job's pin, read from the store the first time (a reloaded job). */
static json_t *job_pin (struct jobs *jobs, struct job *job)
{
    dt_error_t err;
    if (!job->numerics.loaded) {
        json_decref (job->numerics.pin);
        job->numerics.pin = store_job_numerics_pin (jobs->ctx->store, job->row.id, &err);
        if (!job->numerics.pin && err.text[0]) {
            dt_log (LOG_ERR, "job %lld: %s", (long long)job->row.id, err.text);
            return NULL;
        }
        job->numerics.loaded = true;
    }
    return job->numerics.pin;
}

void jobs_numerics_env (struct jobs *jobs, struct job *job, json_t *env)
{
    const json_t *pin = job_pin (jobs, job);
    const char *k;
    json_t *v;

    json_object_foreach (json_object_get (pin, "pin_env"), k, v)
    {
        if (!json_object_get (job->spec.env, k))
            json_object_set (env, k, v);
    }
}

/* What differs: {member: {"pinned": x, "now": y}} over both objects. */
static json_t *numerics_diff (const json_t *pin, const json_t *now)
{
    json_t *d = json_object ();
    const char *k;
    json_t *v;

    json_object_foreach ((json_t *)pin, k, v)
    {
        json_t *w = json_object_get (now, k);
        if (!w || !json_equal (v, w))
            json_object_set_new (
              d, k, json_pack ("{s:O s:O}", "pinned", v, "now", w ? w : json_null ()));
    }
    json_object_foreach ((json_t *)now, k, v)
    {
        if (!json_object_get (pin, k))
            json_object_set_new (d, k, json_pack ("{s:n s:O}", "pinned", "now", v));
    }
    return d;
}

struct numerics_arg {
    const json_t *numerics;
    bool changed;
    const char *node, *detail;
    int rank;
    const json_t *data;
};

static int tx_numerics (struct jobs *jobs, struct job *job, struct attempt *att,
                        void *arg, dt_error_t *err)
{
    struct numerics_arg *a = arg;
    if (store_attempt_numerics (jobs->ctx->store, job->row.id, att->row.attempt,
                                a->numerics, a->changed, err) < 0)
        return -1;
    if (!a->data)
        return 0;
    return store_event (jobs->ctx->store, dt_real_ms (), job->row.id, att->row.attempt,
                        "numerics_changed", a->node, a->rank, a->detail, a->data, err);
}

/* A member's value as text: a string as is, anything else as JSON. */
static void value_text (const json_t *v, char *buf, size_t len)
{
    char *t = json_is_string (v) ? NULL : json_dumps (v, JSON_ENCODE_ANY);
    snprintf (buf, len, "%s", json_is_string (v) ? json_string_value (v) : t ? t : "?");
    free (t);
}

/* "blas_core Haswell -> Cooperlake, ..." (pin_env, which follows from the
 * others, left out). */
static void diff_text (const json_t *d, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t at = 0;
    buf[0] = '\0';
    json_object_foreach ((json_t *)d, k, v)
    {
        char p[96], q[96];
        if (!strcmp (k, "pin_env"))
            continue;
        value_text (json_object_get (v, "pinned"), p, sizeof (p));
        value_text (json_object_get (v, "now"), q, sizeof (q));
        int n = snprintf (buf + at, len - at, "%s%s %s -> %s", at ? ", " : "", k, p, q);
        if (n < 0 || (size_t)n >= len - at)
            break;
        at += n;
    }
    if (!at)
        snprintf (buf, len, "pin_env");
}

int jobs_numerics (struct jobs *jobs, struct attempt *att, const char *node, int rank,
                   const json_t *numerics, dt_error_t *err)
{
    struct job *job = att->job;
    json_t *pin = job_pin (jobs, job);
    struct numerics_arg a = { numerics, false, node, NULL, rank, NULL };
    char what[256], detail[512];
    int rc;

    if (!pin) { /* the job's first report: its pin */
        if (transact (jobs, job, att, tx_numerics, &a, err) < 0)
            return -1;
        job->numerics.pin = json_deep_copy (numerics);
        job->numerics.loaded = true;
        att->numerics.stored = true;
        return 0;
    }
    if (json_equal (pin, (json_t *)numerics)) {
        if (att->numerics.stored)
            return 0;
        if (transact (jobs, job, att, tx_numerics, &a, err) < 0)
            return -1;
        att->numerics.stored = true;
        return 0;
    }
    if (att->numerics.changed) /* recorded once per attempt */
        return 0;
    json_t *d = numerics_diff (pin, numerics);
    diff_text (d, what, sizeof (what));
    snprintf (detail, sizeof (detail),
              "rank %d on %s computes with other numerics than the job's first "
              "attempt (%s): %s",
              rank, node ? node : "?", what,
              job->spec.numerics_strict
                ? "refused (numerics strict), the node is excluded"
                : "from this attempt on, the parameters are no longer bit-identical "
                  "to an uninterrupted run's");
    a.changed = true;
    a.detail = detail;
    a.data =
      json_pack ("{s:i s:O s:O s:o s:b}", "attempt", att->row.attempt, "pinned", pin,
                 "now", numerics, "changed", d, "strict", job->spec.numerics_strict);
    rc = transact (jobs, job, att, tx_numerics, &a, err);
    json_t *evidence =
      rc == 0 && job->spec.numerics_strict
        ? json_pack ("{s:O}", "changed", json_object_get (a.data, "changed"))
        : NULL;
    json_decref ((json_t *)a.data);
    if (rc < 0)
        return -1;
    att->numerics.stored = att->numerics.changed = true;
    dt_log (LOG_WARNING, "job %lld attempt %d: %s", (long long)job->row.id,
            att->row.attempt, detail);
    if (job->spec.numerics_strict)
        jobs_attempt_fail (jobs, att, "numerics_changed", node, rank, detail, evidence);
    return 0;
}
