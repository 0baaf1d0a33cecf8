/* pipeline.h: pipeline parallelism in dttrain (pipeline.c): a step's and a
 * validation's micro-batches through this rank's stage. */
#ifndef DT_TRAINER_PIPELINE_H
#define DT_TRAINER_PIPELINE_H

#include <stdint.h>

#include "common/errprintf.h"

struct trainer;

/* Forward and backward passes of the samples [a, b) of this step in
 * micro-batches, in the 1F1B schedule with one micro-batch of slack;
 * gradients accumulate (scale: 1 / global batch).  *loss_sum: the summed
 * loss (the last stage's; 0 on the others).  0 or -1 with err (a lost
 * neighbour's error names its rank). */
int pipe_step (struct trainer *t, int64_t a, int64_t b, float scale, double *loss_sum,
               dt_error_t *err);

/* Forward passes of validation windows [a, b) of nval. */
int pipe_eval (struct trainer *t, int64_t a, int64_t b, int64_t nval, double *loss_sum,
               dt_error_t *err);

/* After the run, over the pp group (a collective): every stage's
 * pp_pass_cpu_s, pp_pass_s and pp_phase_s into t->pp_stage_cpu[3 pp]
 * (allocated).  0 or -1 with err. */
int pipe_stage_costs (struct trainer *t, dt_error_t *err);

/* With DT_PP_TRACE=PREFIX in the environment: writes this rank's trace of
 * the passes, sends and receives of every step to PREFIX.RANK (lines "ns
 * cpu_s event index", see pipeline.c); a failure is logged, not fatal. */
void pipe_trace_write (struct trainer *t);

#endif
