/* comm_shm.h: point-to-point links in shared memory between two ranks on
 * one node (comm_shm.c), under gloo's point to point (comm_gloo.cc). */
#ifndef DT_TRAINER_COMM_SHM_H
#define DT_TRAINER_COMM_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "common/errprintf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a rank tells its peer so that the peer can map the ring it sends
 * into (exchanged over gloo; fixed size, no pointers). */
struct shm_hello {
    uint64_t magic;  /* SHM_MAGIC */
    uint64_t cookie; /* random, also in the ring's header */
    int64_t pid;     /* the receiving rank's process */
    int64_t fd;      /* its memfd holding the ring */
    uint64_t ring;   /* the ring's data bytes */
};

struct shm_link;

/* A link to one peer: creates the ring this rank receives into and fills
 * *hello for the peer.  New; NULL with err. */
struct shm_link *shm_link_create (dt_error_t *err);
void shm_link_hello (const struct shm_link *l, struct shm_hello *hello);

/* Maps the peer's ring from its hello (its /proc/PID/fd/FD, checked by
 * the cookie) and watches the peer's process.  -1 with err when the peer
 * is not on this node or cannot be reached (the caller then keeps gloo). */
int shm_link_attach (struct shm_link *l, const struct shm_hello *peer, dt_error_t *err);

/* The largest message the link carries (larger ones go over gloo). */
size_t shm_link_max (const struct shm_link *l);

/* Copies bytes into the peer's ring under slot and returns (buf may be
 * reused at once); waits for room within timeout_ms.  Receive: waits for
 * the next message from the peer, which must be slot with bytes bytes
 * (messages arrive in the order they were sent), and copies it to buf.
 * Both fail (-1 with err) at the deadline, when the peer's process has
 * exited, or after shm_link_abort. */
int shm_link_send (struct shm_link *l, const void *buf, size_t bytes, uint64_t slot,
                   long timeout_ms, dt_error_t *err);
int shm_link_recv (struct shm_link *l, void *buf, size_t bytes, uint64_t slot,
                   long timeout_ms, dt_error_t *err);

/* From any thread: fail the link's waits now and later. */
void shm_link_abort (struct shm_link *l);
void shm_link_destroy (struct shm_link *l);

#ifdef __cplusplus
}
#endif

#endif
