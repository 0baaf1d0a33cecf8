/* main.c: dttrain, the reference trainer of dtctl - startup and shutdown only. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/client/dtclient.h"
#include "common/errprintf.h"
#include "common/log.h"
#include "kernels/kernels.h"
#include "trainer/opts.h"
#include "trainer/train.h"

int main (int argc, char **argv)
{
    struct train_opts o;
    dt_error_t err = { "" };
    dtclient_t *client = NULL;
    struct trainer *t = NULL;
    int rc;
    char ident[32];

    /* A peer that dies mid-collective must give gloo an error (EPIPE,
     * exit 5 with the just-in-time checkpoint), not kill this rank with
     * SIGPIPE. */
    signal (SIGPIPE, SIG_IGN);

    /* Options and environment. */
    dt_log_init ("dttrain", DT_LOG_STDERR, LOG_INFO);
    if ((rc = opts_parse (&o, argc, argv, &err)) != 0) {
        if (rc > 0)
            return 0;
        fprintf (stderr, "dttrain: %s\n", err.text);
        return EXIT_USAGE;
    }
    snprintf (ident, sizeof (ident), "dttrain[%d]", o.rank);

    /* OpenBLAS picked its slow generic kernels on a CPU it does not know:
     * run again with the right core type (read only at library load). */
    const char *core = dt_kern_cpu_better_coretype ();
    if (core && !getenv ("DTTRAIN_NO_REEXEC")) {
        setenv ("OPENBLAS_CORETYPE", core, 1);
        setenv ("DTTRAIN_NO_REEXEC", "1", 1);
        execv ("/proc/self/exe", argv);
        dt_log (LOG_WARNING,
                "re-exec with OPENBLAS_CORETYPE=%s failed; continuing slowly", core);
    }
    dt_log_init (ident, DT_LOG_STDERR, o.quiet ? LOG_NOTICE : LOG_INFO);

    /* The agent (a no-op client when run by hand). */
    if (!(client = dtclient_open ())) {
        fprintf (stderr, "dttrain: out of memory\n");
        return EXIT_TRAIN_ERR;
    }

    /* A stop signal ends the run cleanly with a checkpoint; block it before
     * any thread (gloo, checkpoint writer) starts. */
    trainer_catch_stop_signals ();

    /* A hot spare's standby process: warm, then wait for a rank to take
     * over (train_standby.c). */
    if (train_standby_requested ()) {
        rc = train_standby_wait (&o, &client, &err);
        if (rc != 0) {
            if (rc < 0)
                fprintf (stderr, "dttrain: %s\n", err.text);
            rc = rc < 0 ? EXIT_TRAIN_ERR : 0;
            goto done;
        }
        snprintf (ident, sizeof (ident), "dttrain[%d]", o.rank);
        dt_log_init (ident, DT_LOG_STDERR, o.quiet ? LOG_NOTICE : LOG_INFO);
    }

    /* Data, kernels, model, communicator, resume. */
    if (!(t = trainer_create (&o, client, &rc, &err))) {
        fprintf (stderr, "dttrain: rank %d: %s\n", o.rank, err.text);
        goto done;
    }

    /* Train. */
    rc = trainer_run (t);

done:
    trainer_destroy (t);
    dtclient_close (client);
    return rc;
}
