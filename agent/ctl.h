/* ctl.h: the agent's side of the controller⇄agent API (schemas/agent-api.md):
 * registration, heartbeats, events and the rendezvous kv relay. */
#ifndef DT_AGENT_CTL_H
#define DT_AGENT_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "common/errprintf.h"
#include "node.h"

typedef struct ctl ctl_t;

/* What the controller says when the attempt is ready (register answer). */
struct layout {
    int64_t job;
    int attempt;
    char *run_id;
    int node_rank, num_nodes, ranks_per_node, world_size;
    bool spare;
    char *master_addr;
    int master_port;
    int restart_count, max_restarts;
    char **command;       /* NULL-terminated argv (NULL for a spare) */
    char **env;           /* NULL-terminated "K=V" */
    char *workdir;        /* may be NULL: the agent's cwd */
    char *checkpoint_dir; /* may be NULL */
    int64_t resume_step;  /* -1: no checkpoint to resume from */
    char *resume_dir;     /* may be NULL */
    int64_t heartbeat_interval_ms, hang_timeout_ms, node_timeout_ms;
    int64_t checkpoint_every_steps; /* 0: only on command; DT_CHECKPOINT_EVERY */
    /* integrity: DT_INTEGRITY_EVERY, DT_INTEGRITY_SPIKE_K,
     * DT_INTEGRITY_SPIKE_WINDOW, DT_SKIP_STEPS (-1 / NULL: not sent) */
    int64_t integrity_every_steps, integrity_spike_window;
    double integrity_spike_k;
    char *skip_steps;
    int tree_width;   /* the fan-in tree; 0: heartbeats go to the controller */
    char **ancestors; /* NULL-terminated relay URLs, nearest first; NULL none */
};

void layout_clear (struct layout *l);

/* The answer status that means "your attempt is over": stop and exit. */
#define CTL_GONE 410

/* A retry delay around base_ms: uniformly in [base/2, 3*base/2), so that
 * thousands of agents refused at once (503: the controller at its
 * connection limit) do not all come back in the same instant. */
int64_t ctl_jitter_ms (int64_t base_ms);

/* Uniformly in [0, below) ms (0 when below < 1): a heartbeat's phase. */
int64_t ctl_random_ms (int64_t below);

/* token: the attempt's bearer token (borrowed).  New client or NULL. */
ctl_t *ctl_create (const char *url, const char *token, dt_error_t *err);
void ctl_destroy (ctl_t *c);
/* Use 'token' (borrowed) from now on: the attempt re-formed in place as a
 * new attempt of the same processes.  0, or -1 (out of memory). */
int ctl_set_token (ctl_t *c, const char *token);

/* Register until the controller answers "ready", 410/401/400, 'timeout_ms'
 * passes, or 'stopfd' (the agent's signalfd; -1 for none) becomes readable.
 * Retries every 100 ms, backing off to 1 s; after a 503 (the controller at
 * its connection limit) or 429, from 1 s to 8 s, with jitter, saying so in
 * the log; a "waiting" answer's retry_ms, when given, sets the next wait.
 * Each try waits up to 30 s for its answer (a storm of registrations is
 * answered in turn), so stopfd is seen between tries.  0 with *out filled (caller
 * clears it), or -1 with err: errno ESTALE for 410, EACCES for 401,
 * ETIMEDOUT, EINTR (stopfd readable), EPROTO (bad answer). */
int ctl_register (ctl_t *c, const struct node_info *ni, int64_t timeout_ms, int stopfd,
                  struct layout *out, dt_error_t *err);

/* POST body (borrowed) to path.  0 with *status and, when data != NULL,
 * *data = the envelope's "data" (new reference, may be NULL); -1 with err
 * when the controller could not be reached. */
int ctl_post (ctl_t *c, const char *path, const json_t *body, long *status, json_t **data,
              dt_error_t *err);

/* ctl_post with a body that is already text (len bytes, borrowed) of
 * 'content_type'. */
int ctl_post_text (ctl_t *c, const char *path, const char *body, size_t len,
                   const char *content_type, long *status, json_t **data,
                   dt_error_t *err);

/* The kv relay: 0 with *status (200, 404, 410...); for get on 200, *val
 * (new, malloc'ed) and *len.  -1 with err when unreachable or the answer is
 * malformed. */
int ctl_kv_put (ctl_t *c, const char *key, const void *val, size_t len, long *status,
                dt_error_t *err);
int ctl_kv_get (ctl_t *c, const char *key, void **val, size_t *len, long *status,
                dt_error_t *err);

/* Decode the data of the controller's "ready" answer (borrowed) into *l
 * (cleared first; the caller clears it after a success).  Unknown keys are
 * tolerated, every known one is checked.  Exposed for tests.  0, or -1
 * with err (EPROTO naming the field) and *l cleared. */
int ctl_parse_layout (const json_t *d, struct layout *l, dt_error_t *err);

/* base64 (RFC 4648, with padding), exposed for tests.  encode: new string;
 * decode: new buffer, -1 (EINVAL) on bad input. */
char *b64_encode (const void *p, size_t n);
int b64_decode (const char *s, void **out, size_t *outlen);

#endif
