/* hbparse.h: the body of POST /v1/agent/heartbeat (schemas/agent-api.md),
 * decoded and validated without building a JSON tree.
 *
 * A heartbeat has one fixed shape, {"node": ..., "ranks": [{...}, ...]},
 * and the controller takes 10,000 of them a second.  The fast
 * path reads that shape in one pass, with no allocation once the rank
 * buffer has grown to a heartbeat's size, and accepts only what the
 * general path (jansson, strict, as every other route) accepts; anything
 * it does not handle (an escape in a string, a 17-digit number, a syntax
 * error, a bad field) goes to the general path, which decides and gives
 * the same 400 messages, with field paths, as before.
 */
#ifndef DT_HBPARSE_H
#define DT_HBPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

/* The optional fields of a rank entry that were given (absent and null are
 * "not given"). */
enum hb_field {
    HB_LOCAL_RANK = 1 << 0,
    HB_PID = 1 << 1,
    HB_STATE = 1 << 2,
    HB_CLIENT = 1 << 3,
    HB_STEP = 1 << 4,
    HB_LOSS = 1 << 5,
    HB_SAMPLES = 1 << 6,
    HB_COMPUTE_MS = 1 << 7,
    HB_COMM_MS = 1 << 8,
    HB_BUSY = 1 << 9,
    HB_WAITING = 1 << 10,
    HB_STOPPED = 1 << 11,
    HB_DIMS = 1 << 12,
};

/* "dims": per parallel dimension (tp, pp, dp) bytes, comm_ms, exposed_ms. */
#define HB_NDIMS 9

struct hb_rank {
    unsigned has; /* enum hb_field bits */
    int rank;
    int local_rank;
    int pid;
    int64_t step, samples;
    double loss, compute_ms, comm_ms;
    double dims[HB_NDIMS];
    bool client, busy, waiting, stopped;
    char state[16];
};

/* One decoded heartbeat.  The rank buffer is kept from one call to the
 * next (hb_msg_free releases it). */
/* Entries of "unheard" kept at most (more are an error). */
#define HB_UNHEARD_MAX 64

/* A neighbour in the fan-in tree the sender has not heard from for 'ms'
 * (its own clock): a child by node name, or its relay by URL.  'closed': the
 * child's connection to the sender closed since its last request. */
struct hb_unheard {
    char node[64];   /* "" when relay is given */
    char relay[128]; /* "" when node is given */
    int64_t ms;
    bool closed;
};

struct hb_msg {
    char node[64]; /* "" until the top level is valid */
    struct hb_unheard unheard[HB_UNHEARD_MAX];
    size_t nunheard;
    struct hb_rank *ranks;
    size_t nranks;
    size_t cap;
};

enum hb_result {
    HB_OK = 0,
    HB_ERR_BODY,  /* 400 "request body: <err>" (not JSON, not an object) */
    HB_ERR_FIELD, /* 400 "<field path>: ...": m->node is set when the top
                   * level was valid and only a rank entry is at fault */
    HB_ERR_NOMEM, /* 500 */
};

void hb_msg_init (struct hb_msg *m);
void hb_msg_free (struct hb_msg *m);

/* Decode and validate 'body' (len bytes; need not be NUL-terminated);
 * "rank" must be in [0, world_size).  On HB_OK, m holds the heartbeat;
 * otherwise err says why (the text of the 400 answer, see enum hb_result). */
enum hb_result hb_parse (const char *body, size_t len, int world_size, struct hb_msg *m,
                         dt_error_t *err);

/* The two paths of hb_parse, for the tests.  hb_parse_fast: 1 decoded (m
 * filled), 0 not handled here (m undefined), -1 out of memory.
 * hb_parse_general: hb_parse through jansson alone. */
int hb_parse_fast (const char *body, size_t len, int world_size, struct hb_msg *m);
enum hb_result hb_parse_general (const char *body, size_t len, int world_size,
                                 struct hb_msg *m, dt_error_t *err);

#endif
