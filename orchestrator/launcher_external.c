/* launcher_external.c: the "external" launcher: starts nothing.
 *
 * The agents of an attempt are started by someone else (a benchmark's
 * load generator simulating thousands of agents, or an admin who runs
 * dtagent by hand).  The database holds only a hash of each attempt's
 * token, so submit writes the token to StateDir/external/job-J.A.token
 * (mode 0600 in the private StateDir: for root, or whoever runs dtctld).
 * submit only records the attempt; poll reports it running for as long as
 * it was not cancelled (whether agents are alive is the controller's own
 * business: NodeTimeout); cancel marks it ended.  The handle is
 * "ext:<job>.<attempt>", meaningful on its own, so after a controller
 * restart an unknown handle is simply reported running again.
 */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "orchestrator/launcher.h"

/* A handle that was cancelled (the only state this launcher keeps). */
struct xcancelled {
    struct xcancelled *next;
    char handle[LAUNCHER_HANDLE_MAX];
};

struct external {
    struct xcancelled *cancelled;
    char *dir; /* StateDir/external */
};

static void *external_create (const struct launcher_conf *conf, dt_error_t *err)
{
    struct external *x = calloc (1, sizeof (*x));

    if (!x || asprintf (&x->dir, "%s/external", conf->state_dir) < 0) {
        free (x);
        errnoprintf (err, ENOMEM, "out of memory");
        return NULL;
    }
    if (mkdir (x->dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        errnoprintf (err, e, "%s: %s", x->dir, strerror (e));
        free (x->dir);
        free (x);
        return NULL;
    }
    return x;
}

static void external_destroy (void *ctx)
{
    struct external *x = ctx;

    if (!x)
        return;
    while (x->cancelled) {
        struct xcancelled *n = x->cancelled->next;
        free (x->cancelled);
        x->cancelled = n;
    }
    free (x->dir);
    free (x);
}

static int external_submit (void *ctx, const struct launcher_req *req,
                            char handle[LAUNCHER_HANDLE_MAX], dt_error_t *err)
{
    struct external *x = ctx;
    char path[4096];
    int fd;

    /* The token for whoever starts the agents (only its hash is stored). */
    snprintf (path, sizeof (path), "%s/job-%" PRId64 ".%d.token", x->dir, req->job_id,
              req->attempt);
    unlink (path);
    if ((fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) <
        0)
        return errnoprintf (err, errno, "external launcher: %s: %s", path,
                            strerror (errno));
    if (dprintf (fd, "%s\n", req->token ? req->token : "") < 0) {
        int e = errno;
        close (fd);
        return errnoprintf (err, e, "external launcher: %s: %s", path, strerror (e));
    }
    if (close (fd) < 0)
        return errnoprintf (err, errno, "external launcher: %s: %s", path,
                            strerror (errno));
    snprintf (handle, LAUNCHER_HANDLE_MAX, "ext:%" PRId64 ".%d", req->job_id,
              req->attempt);
    dt_log (LOG_INFO,
            "external launcher: attempt %" PRId64 ".%d recorded (%d nodes x %d ranks); "
            "its agents are started by someone else",
            req->job_id, req->attempt, req->nodes, req->ranks_per_node);
    return 0;
}

static bool is_cancelled (struct external *x, const char *handle)
{
    for (struct xcancelled *c = x->cancelled; c; c = c->next)
        if (!strcmp (c->handle, handle))
            return true;
    return false;
}

static int external_poll (void *ctx, const char *handle, struct launcher_status *st,
                          dt_error_t *err)
{
    struct external *x = ctx;

    (void)err;
    memset (st, 0, sizeof (*st));
    st->exit_code = -1;
    if (is_cancelled (x, handle)) {
        st->state = LAUNCHER_ENDED;
        snprintf (st->cause, sizeof (st->cause), "cancelled");
        snprintf (st->detail, sizeof (st->detail), "external attempt %s cancelled",
                  handle);
    }
    else {
        st->state = LAUNCHER_RUNNING;
        snprintf (st->detail, sizeof (st->detail), "external attempt %s", handle);
    }
    return 0;
}

static int external_cancel (void *ctx, const char *handle, int flags, dt_error_t *err)
{
    struct external *x = ctx;
    struct xcancelled *c;

    (void)flags;
    if (is_cancelled (x, handle))
        return 0;
    if (!(c = calloc (1, sizeof (*c))))
        return errnoprintf (err, ENOMEM, "out of memory");
    snprintf (c->handle, sizeof (c->handle), "%s", handle);
    c->next = x->cancelled;
    x->cancelled = c;
    return 0;
}

const struct launcher_ops launcher_external_ops = {
    .name = "external",
    .create = external_create,
    .destroy = external_destroy,
    .submit = external_submit,
    .poll = external_poll,
    .cancel = external_cancel,
};
