/* chan.h: the agent's Unix socket for its trainers (libdtclient frames,
 * schemas/dtclient-protocol.md).  Non-blocking, driven from the agent's
 * poll loop.  Every request gets exactly one REPLY; a malformed payload is
 * logged and refused with a PROTO reply, a malformed frame header (the
 * stream is then out of sync) is logged, refused, and the connection is
 * closed.  Nothing a peer sends can make the agent exit. */
#ifndef DT_AGENT_CHAN_H
#define DT_AGENT_CHAN_H

#include <poll.h>
#include "common/errprintf.h"
#include "client/dtproto.h"

typedef struct chan chan_t;

/* Handle one decoded request 'm' from the connection whose hello said
 * *conn_rank (-1 before hello; a hello handler sets it).  The handler fills
 * 'reply' (dtproto_begin (reply, DTPROTO_REPLY) and the fields). */
typedef void (*chan_request_f) (const struct dtproto_msg *m, int *conn_rank,
                                struct dtproto_buf *reply, void *arg);

/* Listen on 'path' (a file path, or "@name" for an abstract socket).
 * A stale socket file at path is replaced.  New chan or NULL with err. */
chan_t *chan_create (const char *path, chan_request_f cb, void *arg, dt_error_t *err);
/* Closes every connection (trainers see the hang-up and exit) and removes
 * the socket file. */
void chan_destroy (chan_t *c);

/* Poll entries the chan wants (listener + connections) into pfd[0..max);
 * returns how many were written. */
int chan_pollfds (chan_t *c, struct pollfd *pfd, int max);
/* Handle what poll said about those entries. */
void chan_process (chan_t *c, const struct pollfd *pfd, int n);

/* Number of open connections (for tests and logs). */
int chan_connections (const chan_t *c);

/* Send a REPLY with 'status' and 'text' into 'reply' (helper for handlers). */
void chan_reply_status (struct dtproto_buf *reply, int status, const char *text);

#endif
