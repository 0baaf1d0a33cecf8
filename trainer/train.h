/* train.h: dttrain's training loop - data parallelism (dp / zero1), AdamW, checkpoints,
 * reports. */
#ifndef DT_TRAINER_TRAIN_H
#define DT_TRAINER_TRAIN_H

#include <stdbool.h>

#include "agent/client/dtclient.h"
#include "common/errprintf.h"
#include "trainer/opts.h"

struct trainer;

/* Set up everything (data, backend, model, communicator, resume).  New;
 * NULL with err and *exit_code set (opts.h exit codes). */
struct trainer *trainer_create (const struct train_opts *o, dtclient_t *client,
                                int *exit_code, dt_error_t *err);

/* Train to --steps (or a stop command), then print and report the JSON
 * summary.  Returns the process exit code. */
int trainer_run (struct trainer *t);

void trainer_destroy (struct trainer *t);

/* SIGTERM and SIGUSR1 make the run stop at the next step with a checkpoint
 * (as a STOP command would) and exit 0. */
void trainer_catch_stop_signals (void);

/* train_standby.c: a hot spare's standby process (DT_STANDBY=1): warm up
 * what no rank changes, then wait for the agent to hand it a rank to take
 * over in a re-formed group.  0: it did (o->rank, the environment and
 * *client are the replacement's now: continue with trainer_create); 1: a
 * stop came first (exit 0); -1 with err. */
bool train_standby_requested (void);
int train_standby_wait (struct train_opts *o, dtclient_t **client, dt_error_t *err);

#endif
