/* slurm_alloc.c: in-allocation restart under Slurm: finding dead nodes
 * (slurmctld's view, checked by a TCP probe of slurmd), shrinking the
 * allocation off them, ending the old step, and deciding whether a new
 * attempt can reuse the allocation. */
#include <config.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errprintf.h"
#include "common/log.h"
#include "common/conf.h"
#include "orchestrator/launcher.h"
#include "orchestrator/slurm_int.h"

/* Seconds a slurmd gets to accept a TCP connection before its node counts
 * as dead (see node_probe).  Blocks the controller at most this long, once
 * per failure. */
static const int probe_timeout_ms = 300;

/* Names of a hostlist expression, as a NULL-terminated array (new; free
 * with free_names), or NULL (ENOMEM / bad list). */
char **expand_hostlist (const char *expr, int *count)
{
    hostlist_t hl;
    char **v = NULL, *h;
    int n = 0, cap = 0;

    *count = 0;
    if (!expr || !*expr)
        return calloc (1, sizeof (char *));
    if (!(hl = slurm_hostlist_create (expr)))
        return NULL;
    while ((h = slurm_hostlist_shift (hl))) {
        if (n + 2 > cap) {
            char **nv = realloc (v, (cap = cap * 2 + 8) * sizeof (*v));
            if (!nv) {
                free (h);
                break;
            }
            v = nv;
        }
        v[n++] = strdup (h);
        v[n] = NULL;
        free (h);
    }
    slurm_hostlist_destroy (hl);
    if (!v)
        v = calloc (1, sizeof (char *));
    *count = n;
    return v;
}

void free_names (char **v)
{
    if (v) {
        for (char **p = v; *p; p++)
            free (*p);
        free (v);
    }
}

bool name_in (const char *name, const char *const *list)
{
    for (int i = 0; list && list[i]; i++)
        if (!strcmp (list[i], name))
            return true;
    return false;
}

/* Comma-joined names (new string). */
static char *join_names (char *const *v, int n)
{
    size_t len = 1;
    char *s;

    for (int i = 0; i < n; i++)
        len += strlen (v[i]) + 1;
    if (!(s = calloc (1, len)))
        return NULL;
    for (int i = 0; i < n; i++) {
        if (i)
            strcat (s, ",");
        strcat (s, v[i]);
    }
    return s;
}

/* Which of names[0..n) are dead: Slurm says DOWN / NOT_RESPONDING / FAIL,
 * or their slurmd does not accept a TCP connection within
 * probe_timeout_ms.  The probe is what makes the fast path safe: the
 * controller detects a lost node (missing heartbeats) seconds before Slurm
 * does, and a step spanning a dead node must not be killed before that
 * node has left the allocation (found on scripts/slurm-testbed: it would
 * wedge the allocation).  A crashed machine refuses (its kernel answers)
 * or stays silent; both count as dead.  dead[i] set; -1 on ENOMEM. */
int nodes_dead (struct slurm_launcher *sl, char *const *names, int n, bool *dead)
{
    node_info_msg_t *ni = NULL;
    int *fd;
    struct pollfd *pfd;
    int rc = 0;

    if (!(fd = calloc (n ? n : 1, sizeof (*fd))) ||
        !(pfd = calloc (n ? n : 1, sizeof (*pfd)))) {
        free (fd);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        dead[i] = false;
        fd[i] = -1;
    }
    if (slurm_load_node ((time_t)0, &ni, SHOW_ALL) != SLURM_SUCCESS) {
        ctld_result (sl, slurm_get_errno ());
        ni = NULL; /* probe by name only */
    }
    for (int i = 0; i < n; i++) {
        const char *addr = names[i];
        uint16_t port = 6818;
        for (uint32_t k = 0; ni && k < ni->record_count; k++) {
            node_info_t *nd = &ni->node_array[k];
            if (!nd->name || strcmp (nd->name, names[i]))
                continue;
            uint32_t base = nd->node_state & NODE_STATE_BASE;
            if (base == NODE_STATE_DOWN ||
                (nd->node_state & (NODE_STATE_NO_RESPOND | NODE_STATE_FAIL)))
                dead[i] = true;
            if (nd->node_addr && *nd->node_addr)
                addr = nd->node_addr;
            if (nd->port)
                port = nd->port;
        }
        if (dead[i])
            continue;
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
        struct addrinfo *ai = NULL;
        char ps[8];
        snprintf (ps, sizeof (ps), "%u", port);
        if (getaddrinfo (addr, ps, &hints, &ai) != 0 || !ai) {
            dead[i] = true;
            continue;
        }
        fd[i] = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd[i] >= 0 && connect (fd[i], ai->ai_addr, ai->ai_addrlen) < 0 &&
            errno != EINPROGRESS) {
            close (fd[i]);
            fd[i] = -1;
        }
        if (fd[i] < 0)
            dead[i] = true;
        freeaddrinfo (ai);
    }
    /* Wait for every pending connect together. */
    double deadline = mono_now () + probe_timeout_ms / 1000.0;
    for (;;) {
        int m = 0, left;
        for (int i = 0; i < n; i++)
            if (fd[i] >= 0) {
                pfd[m].fd = fd[i];
                pfd[m].events = POLLOUT;
                pfd[m].revents = 0;
                m++;
            }
        left = (int)((deadline - mono_now ()) * 1000);
        if (m == 0 || left <= 0)
            break;
        if (poll (pfd, m, left) <= 0)
            continue;
        for (int j = 0; j < m; j++) {
            if (!pfd[j].revents)
                continue;
            for (int i = 0; i < n; i++) {
                if (fd[i] != pfd[j].fd)
                    continue;
                int soerr = 0;
                socklen_t sl_ = sizeof (soerr);
                if (getsockopt (fd[i], SOL_SOCKET, SO_ERROR, &soerr, &sl_) < 0 || soerr)
                    dead[i] = true;
                close (fd[i]);
                fd[i] = -1;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) { /* no answer in time */
            dead[i] = true;
            close (fd[i]);
        }
    slurm_free_node_info_msg (ni);
    free (fd);
    free (pfd);
    return rc;
}

/* Remove 'gone' from allocation 'jobid' (scontrol update JobId=J
 * NodeList=<keep>).  Slurm then kills the steps on the removed nodes and
 * lets the allocation live on.  Only the first resize of a job works
 * without slurmdbd (the notes: later ones time out, blocking for seconds),
 * so it is not tried when the job was resized already. */
static int shrink_alloc (struct slurm_launcher *sl, slurm_job_info_t *j,
                         char *const *keep, int nkeep, dt_error_t *err)
{
    job_desc_msg_t u;
    char *list;
    int rc = 0;

    if (j->resize_time != 0)
        return errnoprintf (
          err, EBUSY, "Slurm job %u was resized already (one resize per job)", j->job_id);
    if (!(list = join_names (keep, nkeep)))
        return errnoprintf (err, ENOMEM, "out of memory");
    slurm_init_job_desc_msg (&u);
    u.job_id = j->job_id;
    u.req_nodes = list;
    if (slurm_update_job (&u) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        rc = errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                          "shrinking Slurm job %u to %s: %s", j->job_id, list,
                          slurm_strerror (e));
    }
    else {
        ctld_result (sl, 0);
        dt_log (LOG_NOTICE, "slurm: allocation %u shrunk to %s (failed nodes left it)",
                j->job_id, list);
    }
    free (list);
    return rc;
}

/* Load job 'jobid' (new msg in *msg; its record in *j), or -1 with err. */
static int load_job (struct slurm_launcher *sl, uint32_t jobid, job_info_msg_t **msg,
                     slurm_job_info_t **j, dt_error_t *err)
{
    *msg = NULL;
    if (slurm_load_job (msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        return errnoprintf (
          err, is_comm_error (e) ? EAGAIN : (e == ESLURM_INVALID_JOB_ID ? ENOENT : EIO),
          "slurm_load_job %u: %s", jobid, slurm_strerror (e));
    }
    ctld_result (sl, 0);
    if ((*msg)->record_count < 1) {
        slurm_free_job_info_msg (*msg);
        *msg = NULL;
        return errnoprintf (err, ENOENT, "Slurm job %u not found", jobid);
    }
    *j = &(*msg)->job_array[0];
    return 0;
}

static bool job_live (const slurm_job_info_t *j)
{
    return (j->job_state & JOB_STATE_BASE) == JOB_RUNNING &&
           !(j->job_state & JOB_COMPLETING);
}

/* End the step of attempt 'attempt' in allocation j (and any older step of
 * the same dtctl job) without wedging the allocation: a step whose nodes all
 * live is killed at once; a dead node is first removed from the allocation
 * (first resize only); otherwise the step is left for Slurm, which kills it
 * when it sets the node DOWN (the "DOWN path", ~9 s on the testbed).
 * Returns the number of steps left running. */
int end_steps (struct slurm_launcher *sl, slurm_job_info_t *j, long long job,
               int upto_attempt)
{
    job_step_info_response_msg_t *resp;
    dt_error_t err;
    int left = 0;

    if (!(resp = load_steps (sl, j->job_id, &err))) {
        dt_log (LOG_WARNING, "slurm: %s", err.text);
        return 1;
    }
    for (uint32_t i = 0; i < resp->job_step_count; i++) {
        job_step_info_t *s = &resp->job_steps[i];
        long long sj;
        int sa, n = 0, nalloc = 0, nkeep = 0;
        char **names = NULL, **alloc = NULL, **keep = NULL;
        bool *dead = NULL, any_dead = false, can_kill = true;

        if (s->step_id.step_id >= SLURM_MAX_NORMAL_STEP_ID ||
            parse_step_name (s->name, &sj, &sa) < 0 || sj != job || sa > upto_attempt)
            continue;
        if (!(names = expand_hostlist (s->nodes, &n)) || !(dead = calloc (n + 1, 1)) ||
            nodes_dead (sl, names, n, dead) < 0)
            goto next;
        for (int k = 0; k < n; k++)
            any_dead |= dead[k];
        if (any_dead) {
            /* Keep every allocated node except the dead ones. */
            bool *adead = NULL;
            can_kill = false;
            if ((alloc = expand_hostlist (j->nodes, &nalloc)) &&
                (adead = calloc (nalloc + 1, 1)) &&
                (keep = calloc (nalloc + 1, sizeof (char *))) &&
                nodes_dead (sl, alloc, nalloc, adead) == 0) {
                for (int k = 0; k < nalloc; k++)
                    if (!adead[k])
                        keep[nkeep++] = alloc[k];
                if (nkeep > 0 && j->batch_host &&
                    name_in (j->batch_host, (const char *const *)keep) &&
                    shrink_alloc (sl, j, keep, nkeep, &err) == 0)
                    can_kill = true;
                else if (nkeep > 0)
                    dt_log (LOG_NOTICE,
                            "slurm: step %u.%u spans a dead node; not killing it "
                            "(%s): Slurm ends it when it sets the node DOWN",
                            j->job_id, s->step_id.step_id,
                            j->resize_time ? "allocation resized already" : err.text);
            }
            free (adead);
        }
        if (can_kill) {
            /* What scancel does for a step with SIGKILL: terminate, which
             * also completes the step record (a plain signal did not
             * after a resize). */
            if (slurm_terminate_job_step (j->job_id, s->step_id.step_id) !=
                SLURM_SUCCESS) {
                int e = slurm_get_errno ();
                ctld_result (sl, e);
                if (e != 0 && e != ESLURM_ALREADY_DONE && e != ESLURM_INVALID_JOB_ID)
                    dt_log (LOG_WARNING, "slurm: killing step %u.%u: %s", j->job_id,
                            s->step_id.step_id, slurm_strerror (e));
            }
            else
                dt_log (LOG_INFO, "slurm: killed step %u.%u (%s)", j->job_id,
                        s->step_id.step_id, s->name);
        }
        else
            left++;
    next:
        free (keep); /* borrowed names of alloc */
        free_names (alloc);
        free_names (names);
        free (dead);
    }
    slurm_free_job_step_info_response_msg (resp);
    return left;
}

/* A hot spare replaces 'node' in the running step of allocation 'jobid':
 * the node leaves the allocation (shrink_alloc), so that Slurm does not
 * kill the step when it sets the node DOWN; the step's tasks on the other
 * nodes run on (tested: ../shared/notes/slurm-testbed.md, "Restarting
 * before Slurm marks the node DOWN").  Not when the node is the batch host
 * (its loop is gone) or the job was resized already. */
int drop_node_alloc (struct slurm_launcher *sl, uint32_t jobid, const char *node,
                     dt_error_t *err)
{
    job_info_msg_t *msg;
    slurm_job_info_t *j;
    char **alloc = NULL, **keep = NULL;
    int n = 0, nkeep = 0, rc = -1;
    bool found = false;

    if (load_job (sl, jobid, &msg, &j, err) < 0)
        return -1;
    if (!job_live (j)) {
        errnoprintf (err, ESRCH, "Slurm job %u is no longer running", jobid);
        goto done;
    }
    if (j->batch_host && !strcmp (j->batch_host, node)) {
        errnoprintf (err, EINVAL, "%s is the batch host of Slurm job %u", node, jobid);
        goto done;
    }
    if (!(alloc = expand_hostlist (j->nodes, &n)) ||
        !(keep = calloc ((size_t)n + 1, sizeof (char *)))) {
        errnoprintf (err, ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (!strcmp (alloc[i], node))
            found = true;
        else
            keep[nkeep++] = alloc[i];
    }
    if (!found || nkeep == 0) {
        errnoprintf (err, ENOENT, "%s is not a node of Slurm job %u (%s)", node, jobid,
                     j->nodes ? j->nodes : "");
        goto done;
    }
    rc = shrink_alloc (sl, j, keep, nkeep, err);
done:
    free (keep); /* borrowed names of alloc */
    free_names (alloc);
    slurm_free_job_info_msg (msg);
    return rc;
}

/* Right after submission: a job that Slurm accepted but can never start
 * (more nodes than the partition has, with EnforcePartLimits=NO, Slurm's
 * default) is cancelled and refused, with Slurm's reason. */
int check_startable (struct slurm_launcher *sl, uint32_t jobid, dt_error_t *err)
{
    job_info_msg_t *msg = NULL;
    int rc = 0;

    if (slurm_load_job (&msg, jobid, SHOW_DETAIL) != SLURM_SUCCESS ||
        msg->record_count < 1)
        goto done; /* cannot tell: let poll find out */
    slurm_job_info_t *j = &msg->job_array[0];
    if ((j->job_state & JOB_STATE_BASE) == JOB_PENDING &&
        reason_hopeless (j->state_reason)) {
        char part[96] = "";
        partition_size (j->partition, part, sizeof (part));
        rc = errnoprintf (
          err, EINVAL, "Slurm cannot run this job: %s%s%s (%u nodes requested%s)",
          slurm_job_reason_string (j->state_reason), j->state_desc ? ": " : "",
          j->state_desc ? j->state_desc : "", j->num_nodes, part);
        if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS)
            dt_log (LOG_WARNING, "slurm: cannot cancel refused job %u: %s", jobid,
                    slurm_strerror (slurm_get_errno ()));
    }
done:
    slurm_free_job_info_msg (msg);
    return rc;
}

/* submit with reuse: run the attempt as the next step of the allocation
 * of req->reuse.  0: done (handle "J:N"); 1: not reusable -- that
 * allocation has been ended and the caller submits a new one; -1 with err
 * on a transient error. */
int submit_reuse (struct slurm_launcher *sl, const struct launcher_req *req,
                  char handle[LAUNCHER_HANDLE_MAX], char **dead_out, dt_error_t *err)
{
    job_info_msg_t *msg = NULL;
    slurm_job_info_t *j;
    uint32_t jobid;
    long long job;
    int first, n = 0, usable = 0, want = req->nodes, rc = 1;
    char **names = NULL, why[160] = "";
    bool *dead = NULL;

    if (parse_handle (req->reuse, &jobid, NULL, err) < 0)
        return 1;
    if (load_job (sl, jobid, &msg, &j, err) < 0) {
        if (errno == EAGAIN)
            return -1;
        snprintf (why, sizeof (why), "%s", err->text);
        goto fallback;
    }
    if (!job_live (j) || parse_step_name (j->name, &job, &first) < 0 ||
        job != req->job_id) {
        snprintf (why, sizeof (why), "Slurm job %u is no longer running", jobid);
        goto fallback;
    }
    if (!(names = expand_hostlist (j->nodes, &n)) || !(dead = calloc (n + 1, 1)) ||
        nodes_dead (sl, names, n, dead) < 0) {
        snprintf (why, sizeof (why), "out of memory");
        goto fallback;
    }
    for (int i = 0; i < n; i++) {
        if (j->batch_host && !strcmp (names[i], j->batch_host) && dead[i]) {
            snprintf (why, sizeof (why), "its batch host %s is lost", j->batch_host);
            goto fallback;
        }
        if (!dead[i] && !name_in (names[i], req->exclude))
            usable++;
    }
    if (usable < want) {
        snprintf (why, sizeof (why), "%d healthy nodes left in it, %d needed", usable,
                  want);
        goto fallback;
    }
    /* The previous attempts' steps: gone already when the controller
     * waited for poll to say ENDED; a step left on a dead node ends at
     * DOWN, and Slurm starts the new (exclusive) step only after that. */
    end_steps (sl, j, job, req->attempt - 1);
    snprintf (handle, LAUNCHER_HANDLE_MAX, "%u:%d", jobid, req->attempt);
    struct step_track *t = track_get (sl, jobid, req->attempt, true);
    if (t)
        t->seen = t->kept = false;
    dt_log (LOG_NOTICE,
            "slurm: job %" PRId64 " attempt %d runs in allocation %u "
            "(in-allocation restart, %d of %d nodes usable)",
            req->job_id, req->attempt, jobid, usable, n);
    rc = 0;
    goto done;
fallback:
    /* End the kept allocation: no process of it may survive into the next
     * Slurm job. */
    dt_log (LOG_NOTICE,
            "slurm: job %" PRId64 " attempt %d: not reusing allocation %u (%s): "
            "ending it, submitting a new Slurm job",
            req->job_id, req->attempt, jobid, why);
    if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        ctld_result (sl, e);
        if (is_comm_error (e)) {
            rc = errnoprintf (err, EAGAIN, "slurm_kill_job %u: %s", jobid,
                              slurm_strerror (e));
            goto done;
        }
    }
    track_drop_job (sl, jobid);
    /* The new job must not land on the nodes found dead here either:
     * Slurm may not know yet. */
    if (dead && names) {
        char **d = calloc (n + 1, sizeof (char *));
        int nd = 0;
        for (int i = 0; d && i < n; i++)
            if (dead[i])
                d[nd++] = names[i];
        if (nd)
            *dead_out = join_names (d, nd);
        free (d);
    }
    rc = 1;
done:
    free_names (names);
    free (dead);
    slurm_free_job_info_msg (msg);
    return rc;
}

/* cancel with KEEP_ALLOC: the attempt is over for the controller; its
 * step is ended now where that is safe (end_steps), and poll reports the
 * attempt ENDED once Slurm no longer lists the step.  A lost batch host
 * loses the batch script's loop: then the whole allocation ends. */
int cancel_keep (struct slurm_launcher *sl, uint32_t jobid, int attempt, dt_error_t *err)
{
    job_info_msg_t *msg;
    slurm_job_info_t *j;
    struct step_track *t;
    long long job;
    int first;

    if (load_job (sl, jobid, &msg, &j, err) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!job_live (j) || parse_step_name (j->name, &job, &first) < 0) {
        slurm_free_job_info_msg (msg);
        return 0;
    }
    if (attempt == 0)
        attempt = first;
    if ((t = track_get (sl, jobid, attempt, true)))
        t->kept = true;
    if (j->batch_host) {
        char *bh = j->batch_host;
        bool dead = false;
        if (nodes_dead (sl, &bh, 1, &dead) == 0 && dead) {
            dt_log (LOG_NOTICE,
                    "slurm: batch host %s of Slurm job %u is lost: ending the "
                    "allocation",
                    j->batch_host, jobid);
            slurm_free_job_info_msg (msg);
            if (slurm_kill_job (jobid, SIGKILL, 0) != SLURM_SUCCESS) {
                int e = slurm_get_errno ();
                ctld_result (sl, e);
                if (e != ESLURM_ALREADY_DONE && e != ESLURM_INVALID_JOB_ID)
                    return errnoprintf (err, is_comm_error (e) ? EAGAIN : EIO,
                                        "slurm_kill_job %u: %s", jobid,
                                        slurm_strerror (e));
            }
            return 0;
        }
    }
    int left = end_steps (sl, j, job, attempt);
    dt_log (LOG_INFO, "slurm: attempt %d of Slurm job %u ended, allocation kept%s",
            attempt, jobid,
            left ? " (its step ends when Slurm sets the dead node DOWN)" : "");
    slurm_free_job_info_msg (msg);
    return 0;
}
