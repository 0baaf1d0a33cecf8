/* train_int.h: what the files of dttrain's training loop share (train.c,
 * train_ckpt.c, train_ctl.c): the trainer's state and each file's
 * functions the others call. */
#ifndef DT_TRAIN_INT_H
#define DT_TRAIN_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/errprintf.h"
#include "trainer/ckpt.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/integrity.h"
#include "trainer/model.h"
#include "trainer/train.h"

struct trainer {
    struct train_opts o;
    dtclient_t *client;
    struct dt_kern_ops *k;
    dt_comm_t *comm;
    struct data data;
    struct model model;
    int rank, world;
    size_t *counts; /* balanced partition of the parameters */
    size_t lo, hi;  /* this rank's slice */
    float *m, *v;   /* AdamW moments: full (dp) or slice (zero1) */
    size_t opt_elems;
    struct ckpt_writer *writer;
    struct integ *integ; /* silent-error guards (integrity.c) */
    char *config;
    int64_t step; /* completed steps */
    int64_t start_step;
    int mb; /* micro-batch */
    uint8_t *ctx_host, *tgt_host;
    double *ctrl;
    size_t nctrl;
    /* commands */
    int64_t my_ckpt_req, my_stop_req, ckpt_req_done, last_saved;
    int64_t pending_commit;
    /* stats */
    double compute_s, comm_s, ckpt_stall_s, ckpt_snapshot_s, ckpt_write_s, ar_bytes_s,
      ar_bytes;
    int nckpt;
    double last_loss, val_loss;
    int have_val;
    /* gradient buckets reduced by a comm thread during the backward pass */
    size_t bucket, nbuckets;
    struct {
        int on;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        ssize_t next;       /* next bucket to reduce (descending); -1: done */
        ssize_t ready_from; /* buckets >= this are final */
        int quit, failed;
        dt_error_t err;
    } ov;
};

/* train.c: the loop: steps, gradients, the optimizer */

/* train_ckpt.c: checkpoints */
int train_resume (struct trainer *t, int *exit_code, dt_error_t *err);
void train_snapshot_barrier (struct trainer *t);
int train_checkpoint (struct trainer *t, dt_error_t *err);
void train_ctrl_fill (struct trainer *t, double loss_sum, double sumsq);
double train_ctrl_max (struct trainer *t, int field);
void train_maybe_commit (struct trainer *t);
int train_comm_lost (struct trainer *t);
uint32_t train_params_crc (struct trainer *t);

/* train_ctl.c: the controller, commands, signals */
void train_client_waiting (void *client, int waiting);
dt_comm_t *train_comm_open (struct trainer *t, dt_error_t *err);
void train_poll_commands (struct trainer *t);
void train_inject (struct trainer *t);

#endif
