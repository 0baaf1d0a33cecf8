/* spec.h: validation of job specs (schemas/job.schema.json).
 *
 * A spec is decoded strictly: unknown fields, wrong types and out-of-range
 * values are refused with the dotted path of the field at fault
 * ("checkpoint.every_steps: expected integer").  The result is a new,
 * normalized spec with every default filled in; it is what is stored and
 * what every later attempt is built from.
 */
#ifndef DT_SPEC_H
#define DT_SPEC_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "common/errprintf.h"

/* Defaults that come from dtctld.conf rather than from the schema. */
struct spec_defaults {
    const char *checkpoint_root;   /* CheckpointRoot */
    int64_t heartbeat_interval_ms; /* HeartbeatInterval */
    int64_t node_timeout_ms;       /* NodeTimeout */
    int64_t hang_timeout_ms;       /* HangTimeout (0: auto) */
    int64_t tree_width;            /* TreeWidth (0: direct connections) */
};

/* Limits (also in job.schema.json). */
enum {
    SPEC_NAME_MAX = 64,
    /* A fan-in tree (heartbeat.tree_width) keeps this many agents off
     * the controller's connections; one rank each, the world's limit. */
    SPEC_MAX_NODES = 65536,
    SPEC_MAX_TREE_WIDTH = 4096, /* heartbeat.tree_width, TreeWidth */
    SPEC_MAX_RANKS_PER_NODE = 1024,
    SPEC_MAX_WORLD = 65536,
    SPEC_MAX_ARGS = 4096,
    SPEC_MAX_STR = 4096,
    SPEC_MAX_ENV = 1024,
};

/* parallel.shrink's dimensions (the same numbers as ftpolicy.h's FT_DIM_*). */
enum { SPEC_DIM_TP = 1, SPEC_DIM_PP = 2 };

/* Validate 'in' (borrowed).  Returns a new normalized spec, or NULL with
 * errno EINVAL and err "<field path>: <problem>". */
json_t *spec_validate (const json_t *in, const struct spec_defaults *d, dt_error_t *err);

/* The fields of a normalized spec that the job manager reads, decoded
 * once (at submission and when a job is reloaded) instead of looked up by
 * name on every heartbeat.  The strings and env are borrowed from the spec
 * they were parsed from, which must outlive this struct (the job row owns
 * it).  A missing field reads as 0 / NULL, as a lookup by name did. */
struct job_spec {
    int nodes, spare_nodes, ranks_per_node;
    const char *partition; /* NULL: the launcher's default */
    int64_t time_limit_s;  /* 0: none */
    const char *workdir;
    json_t *env; /* object of strings */
    /* numerics "strict": a node whose trainers compute otherwise than the
     * job's pinned numerics is excluded (else the change is recorded) */
    bool numerics_strict;
    struct {
        const char *dir;     /* checkpoint root of the job's directory */
        int64_t every_steps; /* 0: no periodic checkpoints */
        int keep;
    } ckpt;
    struct {
        int64_t max_restarts;
        bool exclude_failed_nodes;
        /* survivors re-form in place after a rank exit (jobs/reform.c) */
        bool reform;
        int min_nodes;
    } restart;
    struct {
        int64_t interval_ms, node_timeout_ms;
        int64_t hang_timeout_ms; /* 0: automatic */
        int64_t tree_width;      /* fan-in tree of the agents; 0: direct */
    } hb;
    struct {
        double threshold;
        int window_steps;
        const char *action; /* "report" or "exclude" */
    } straggler;
    struct {
        int64_t every_steps; /* fingerprints every N steps; 0: off */
        const char *action;  /* "report" or "rollback"; NULL in an older spec */
        bool skip_bad_batches;
        double spike_k; /* 0: no spike detection */
        int spike_window;
    } integ;
    struct {
        double threshold; /* 0: the default (a spec from before comm_bound) */
        int window_steps; /* 0: the default */
    } comm_bound;
    struct {
        int tp, pp; /* the trainer's layout (DT_TP, DT_PP); 1 x 1 by default */
        /* parallel.shrink: what a restart on too few nodes may reduce, in
         * order (SPEC_DIM_*; nshrink of them) */
        int shrink[2], nshrink;
        /* zero1: the optimizer state is sharded across the data-parallel
         * group (DT_PARALLEL=zero1), so no just-in-time checkpoint */
        bool zero1;
    } parallel;
};

/* Decode normalized 'spec' (borrowed, see above) into *js. */
void spec_parse (const json_t *spec, struct job_spec *js);

/* The field path of an error text made by spec_validate (the part before
 * the first ": "), copied into buf; "" when there is none.  Returns buf. */
char *spec_error_field (const dt_error_t *err, char *buf, size_t len);

#endif
