/* steptrainer.c: a small real trainer for system tests of dtagent and
 * dtctld.  It links libdtclient, "trains" by sleeping a fixed time per step,
 * reports every step, obeys commands (checkpoint at step S writes a small
 * shard file and reports it; stop checkpoints and exits 0; abort exits 1),
 * and can rendezvous all ranks through the kv store.
 *
 *   steptrainer [--steps N] [--step-ms MS] [--rendezvous] [--fail-at STEP[:CODE]]
 *
 * Environment: what dtagent gives every rank (RANK, WORLD_SIZE,
 * DT_CHECKPOINT_DIR, DT_RESUME_STEP, DT_AGENT_SOCKET, ...).  Without an
 * agent it runs standalone (libdtclient's no-op client). */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/client/dtclient.h"

static long env_long (const char *name, long dflt)
{
    const char *s = getenv (name);
    return s && *s ? strtol (s, NULL, 10) : dflt;
}

static void sleep_ms (long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* CRC32C, bitwise: a shard of a few bytes needs nothing faster. */
static uint32_t crc32c (const void *p, size_t n)
{
    const unsigned char *s = p;
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *s++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

static void checkpoint (dtclient_t *c, long rank, long step)
{
    const char *dir = getenv ("DT_CHECKPOINT_DIR");
    char path[4096], tmp[4200], body[128];
    if (!dir) {
        dtclient_shard_failed (c, step, "DT_CHECKPOINT_DIR not set");
        return;
    }
    snprintf (path, sizeof (path), "%s/step-%ld", dir, step);
    mkdir (dir, 0755);
    mkdir (path, 0755);
    snprintf (path, sizeof (path), "%s/step-%ld/rank-%ld.ckpt", dir, step, rank);
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    int n = snprintf (body, sizeof (body), "steptrainer rank %ld step %ld\n", rank, step);
    FILE *f = fopen (tmp, "w");
    if (!f || fwrite (body, 1, (size_t)n, f) != (size_t)n || fflush (f) ||
        fsync (fileno (f)) || fclose (f) || rename (tmp, path)) {
        dtclient_shard_failed (c, step, strerror (errno));
        return;
    }
    dtclient_err_t e =
      dtclient_shard_written (c, step, path, (uint64_t)n, crc32c (body, (size_t)n));
    fprintf (stderr, "rank %ld: checkpoint step %ld -> %s (%s)\n", rank, step, path,
             dtclient_strerror (e));
}

int main (int argc, char **argv)
{
    long steps = 100, step_ms = 50, fail_at = -1, fail_code = 3;
    int rendezvous = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--steps") && i + 1 < argc)
            steps = atol (argv[++i]);
        else if (!strcmp (argv[i], "--step-ms") && i + 1 < argc)
            step_ms = atol (argv[++i]);
        else if (!strcmp (argv[i], "--rendezvous"))
            rendezvous = 1;
        else if (!strcmp (argv[i], "--fail-at") && i + 1 < argc) {
            char *colon;
            fail_at = strtol (argv[++i], &colon, 10);
            if (*colon == ':')
                fail_code = atol (colon + 1);
        }
        else {
            fprintf (stderr,
                     "usage: steptrainer [--steps N] [--step-ms MS] [--rendezvous] "
                     "[--fail-at STEP[:CODE]]\n");
            return 2;
        }
    }
    long rank = env_long ("RANK", 0), world = env_long ("WORLD_SIZE", 1);
    long start = env_long ("DT_RESUME_STEP", 0);
    dtclient_t *c = dtclient_open ();
    if (!c)
        return 1;
    fprintf (stderr, "rank %ld/%ld: pid %d, agent %s, resume at %ld\n", rank, world,
             (int)getpid (), dtclient_connected (c) ? "connected" : "none", start);

    if (rendezvous) {
        /* Every rank publishes its pid and reads everyone else's. */
        char key[64], val[32];
        snprintf (key, sizeof (key), "steptrainer/rank-%ld", rank);
        snprintf (val, sizeof (val), "%d", (int)getpid ());
        if (dtclient_kv_set (c, key, val, strlen (val)) != DTCLIENT_OK) {
            fprintf (stderr, "rank %ld: kv set failed\n", rank);
            return 1;
        }
        for (long r = 0; r < world; r++) {
            void *v;
            size_t n;
            snprintf (key, sizeof (key), "steptrainer/rank-%ld", r);
            dtclient_err_t e = dtclient_kv_wait (c, key, 30000, &v, &n);
            if (e != DTCLIENT_OK) {
                fprintf (stderr, "rank %ld: kv wait %s: %s\n", rank, key,
                         dtclient_strerror (e));
                return 1;
            }
            fprintf (stderr, "rank %ld: rendezvous: rank %ld is pid %.*s\n", rank, r,
                     (int)n, (char *)v);
            free (v);
        }
    }

    long ckpt_at = -1;
    for (long step = start + 1; step <= steps; step++) {
        sleep_ms (step_ms);
        if (step == fail_at) {
            fprintf (stderr, "rank %ld: failing at step %ld with code %ld as asked\n",
                     rank, step, fail_code);
            return (int)fail_code;
        }
        dtclient_step (c, step, 1.0 / (double)step, 32, step_ms / 1000.0, 0.0);
        dtclient_cmd_t cmd;
        while (dtclient_poll (c, &cmd)) {
            fprintf (stderr, "rank %ld: command %d step %lld at step %ld\n", rank,
                     cmd.kind, (long long)cmd.step, step);
            if (cmd.kind == DTCLIENT_CMD_CHECKPOINT)
                ckpt_at = cmd.step > step ? cmd.step : step;
            else if (cmd.kind == DTCLIENT_CMD_STOP) {
                checkpoint (c, rank, step);
                dtclient_close (c);
                return 0;
            }
            else if (cmd.kind == DTCLIENT_CMD_ABORT)
                return 1;
        }
        if (step == ckpt_at) {
            checkpoint (c, rank, step);
            ckpt_at = -1;
        }
    }
    if (rank == 0) {
        char res[128];
        snprintf (res, sizeof (res), "{\"steps\": %ld, \"trainer\": \"steptrainer\"}",
                  steps);
        dtclient_result (c, res);
    }
    fprintf (stderr, "rank %ld: done after %ld steps\n", rank, steps);
    dtclient_close (c);
    return 0;
}
