/* dtproto.h: the trainer⇄agent wire protocol (frames over the Unix socket)
 * and the layout of the per-rank shared-memory page.
 *
 * Internal to dtctl: libdtclient and dtagent both compile dtproto.c (through
 * the convenience library libdtproto.la); it is not installed.  It depends on
 * nothing but libc so that libdtclient stays self-contained.  The format is
 * documented in schemas/dtclient-protocol.md; the Python module
 * agent/client/python/dtclient/__init__.py implements the same bytes.
 *
 * Frame: a 12-byte header, then 'length' bytes of payload.
 *   0  4  magic "DTC" + protocol version byte (1)
 *   4  2  type (enum dtproto_type), little endian
 *   6  2  flags, must be 0
 *   8  4  payload length, little endian, <= DTPROTO_MAX_PAYLOAD
 * Payload: a sequence of fields, each
 *   0  2  tag (enum dtproto_tag), little endian
 *   2  4  value length, little endian
 *   6  n  value: int tags are 8-byte little-endian two's complement; string
 *         and bytes tags are raw bytes (strings: no NUL, UTF-8 by convention).
 */
#ifndef DTPROTO_H
#define DTPROTO_H

#include <stddef.h>
#include <stdint.h>

#define DTPROTO_VERSION 1
#define DTPROTO_HDR_LEN 12
#define DTPROTO_FIELD_HDR_LEN 6
/* A kv value (64 KiB) plus its key and field headers fits with room to
 * spare; anything larger is refused before it is read, so a broken or
 * hostile peer cannot make the agent allocate without bound. */
#define DTPROTO_MAX_PAYLOAD (128 * 1024)
#define DTPROTO_MAX_VALUE (64 * 1024)
#define DTPROTO_MAX_KEY 200
#define DTPROTO_MAX_PATH 4096
#define DTPROTO_MAX_TEXT 4096

enum dtproto_type {
    DTPROTO_HELLO = 1,        /* rank, pid                 → REPLY */
    DTPROTO_SHARD = 2,        /* step, path, bytes, crc32c [, rank, jit] → REPLY */
    DTPROTO_SHARD_FAILED = 3, /* step, text                → REPLY */
    DTPROTO_RESULT = 4,       /* json                      → REPLY */
    DTPROTO_KV_SET = 5,       /* key, value                → REPLY */
    DTPROTO_KV_GET = 6,       /* key                       → REPLY (+ value) */
    DTPROTO_REPLY = 7,        /* status [, text] [, value]   (agent → client) */
    DTPROTO_INTEGRITY = 8,    /* json                      → REPLY */
    DTPROTO_PERF = 9,         /* json                      → REPLY */
    DTPROTO_CAPS = 10,        /* json: what the trainer can do → REPLY */
    DTPROTO_NUMERICS = 11,    /* json: what the trainer computes with → REPLY */
    DTPROTO_TYPE_MAX = 11,
};

enum dtproto_tag {
    DTPROTO_T_RANK = 1,    /* int */
    DTPROTO_T_PID = 2,     /* int */
    DTPROTO_T_STEP = 3,    /* int */
    DTPROTO_T_PATH = 4,    /* string */
    DTPROTO_T_BYTES = 5,   /* int, >= 0 */
    DTPROTO_T_CRC32C = 6,  /* int, 0 .. 2^32-1 */
    DTPROTO_T_TEXT = 7,    /* string */
    DTPROTO_T_KEY = 8,     /* string [A-Za-z0-9_.:/-]{1,200} */
    DTPROTO_T_VALUE = 9,   /* bytes, <= 64 KiB */
    DTPROTO_T_STATUS = 10, /* int, a dtclient_err_t */
    DTPROTO_T_JSON = 11,   /* string, a JSON object as text */
    DTPROTO_T_JIT = 12,    /* int, 0 or 1: a just-in-time checkpoint shard */
    DTPROTO_TAG_MAX = 12,
};

/* A decoded message.  Strings/bytes point into the payload buffer that was
 * decoded (borrowed: valid while that buffer is). */
struct dtproto_msg {
    int type;
    uint32_t present;                      /* bit (1 << tag) per field seen */
    int64_t i[DTPROTO_TAG_MAX + 1];        /* int fields */
    const uint8_t *s[DTPROTO_TAG_MAX + 1]; /* string/bytes fields */
    size_t slen[DTPROTO_TAG_MAX + 1];
};

static inline int dtproto_has (const struct dtproto_msg *m, int tag)
{
    return (m->present >> tag) & 1;
}

/* Check a frame header (DTPROTO_HDR_LEN bytes): magic, version, known type,
 * zero flags, length within bounds.  0 with *type and *len set, or -1 with a
 * one-line reason in err (errlen may be 0).  After a bad header the stream
 * is out of sync: the connection must be closed. */
int dtproto_header_decode (const uint8_t *hdr, int *type, uint32_t *len, char *err,
                           size_t errlen);

/* Decode and validate the payload of a message of 'type': every field is
 * complete, no tag repeats, int fields are 8 bytes and in range, strings
 * have no NUL and are within their limits, required fields are present and
 * no field foreign to the type appears.  0, or -1 with err. */
int dtproto_decode (int type, const uint8_t *payload, size_t len, struct dtproto_msg *m,
                    char *err, size_t errlen);

/* Whether 'key' (len bytes) is a valid kv key. */
int dtproto_key_valid (const char *key, size_t len);

/* A growable encode buffer. */
struct dtproto_buf {
    uint8_t *data; /* new, owned by the buf; free with dtproto_buf_free */
    size_t len;
    size_t cap;
    int failed; /* an append ran out of memory or over the limit */
};

/* Start a frame of 'type' in b (reset first).  The appends may be chained;
 * dtproto_end fills in the length.  dtproto_end returns 0, or -1 (errno
 * ENOMEM or EMSGSIZE) when any append failed. */
void dtproto_begin (struct dtproto_buf *b, int type);
void dtproto_add_int (struct dtproto_buf *b, int tag, int64_t v);
void dtproto_add_bytes (struct dtproto_buf *b, int tag, const void *p, size_t n);
void dtproto_add_str (struct dtproto_buf *b, int tag, const char *s);
int dtproto_end (struct dtproto_buf *b);
void dtproto_buf_free (struct dtproto_buf *b);

/* ---- the shared-memory page of one rank ---------------------------------
 * Created and sized by the agent (path in DT_AGENT_SHM), mapped shared by
 * both.  Each half is a seqlock: the writer makes 'seq' odd, writes, makes it
 * even again; a reader retries while seq is odd or changed under it.  The
 * trainer writes 'report', the agent writes 'cmd'; each side only reads the
 * other's half, so neither needs a lock or a system call. */
#define DTSHM_MAGIC 0x4d485344u /* "DSHM" */
#define DTSHM_SIZE 4096

struct dtshm_report {
    uint64_t seq;
    int64_t step;
    double loss;
    int64_t samples;
    double compute_ms;
    double comm_ms;
    int64_t nreports; /* count of dtclient_step calls */
    int32_t busy;
    /* Threads of the rank now inside a collective (blocked on its peers,
     * not hung themselves).  Not under the seqlock: several threads of a
     * trainer change it (a comm thread overlaps the backward pass), each
     * with one atomic add, and the reader loads it atomically. */
    int32_t waiting;
};

struct dtshm_cmd {
    uint64_t seq;
    uint64_t cmd_seq; /* increases with each new command */
    int32_t kind;     /* dtclient_cmd_kind_t */
    int32_t pad;
    int64_t step;
};

/* Per parallel dimension (dttrain's layouts: tp, pp, dp), what the last
 * step moved, the time its communication took, and the part of that time
 * the step waited for (exposed: not hidden behind compute).  A seqlock of
 * its own, written by one thread after the report (dtclient_step_dims);
 * step 0: never written (a client without layouts). */
#define DTSHM_NDIMS 3
struct dtshm_dims {
    uint64_t seq;
    int64_t step;
    double bytes[DTSHM_NDIMS];
    double comm_ms[DTSHM_NDIMS];
    double exposed_ms[DTSHM_NDIMS];
};

struct dtshm_page {
    uint32_t magic;
    uint32_t version; /* DTPROTO_VERSION */
    int32_t rank;
    int32_t pad;
    /* The cmd_seq of the newest command the client has read (the client
     * writes it, atomically, after each read; 0 until then): the agent
     * never replaces an unread command with one it outranks. */
    uint64_t cmd_read;
    char pad1[64 - 24];
    struct dtshm_report report __attribute__ ((aligned (64)));
    struct dtshm_cmd cmd __attribute__ ((aligned (64)));
    struct dtshm_dims dims __attribute__ ((aligned (64)));
};

/* The Python module hard-codes these offsets
 * (agent/client/python/dtclient/__init__.py). */
_Static_assert(offsetof (struct dtshm_page, cmd_read) == 16, "cmd_read at 16");
_Static_assert(offsetof (struct dtshm_page, report) == 64, "report at 64");
_Static_assert(offsetof (struct dtshm_page, cmd) == 128, "cmd at 128");
_Static_assert(offsetof (struct dtshm_report, busy) == 56, "report.busy at 64+56");
_Static_assert(offsetof (struct dtshm_report, waiting) == 60, "report.waiting at 64+60");
_Static_assert(offsetof (struct dtshm_cmd, step) == 24, "cmd.step at 128+24");
_Static_assert(offsetof (struct dtshm_page, dims) == 192, "dims at 192");
_Static_assert(sizeof (struct dtshm_page) <= DTSHM_SIZE, "page fits");

/* Seqlock read of the report / cmd half (spins while a write is in flight;
 * writes are a few stores long).  Used by the agent for reports and by the
 * client for commands.  0, or -1 (EAGAIN) when the writer left the lock
 * held (it died mid-write): the caller keeps its previous copy. */
int dtshm_read_report (const volatile struct dtshm_page *p, struct dtshm_report *out);
int dtshm_read_cmd (const volatile struct dtshm_page *p, struct dtshm_cmd *out);
int dtshm_read_dims (const volatile struct dtshm_page *p, struct dtshm_dims *out);
/* Seqlock write of a new command (the agent). */
void dtshm_write_cmd (volatile struct dtshm_page *p, int kind, int64_t step);
/* The page holds one command.  A command the client has not read yet
 * (cmd_read behind cmd_seq) is replaced only by one of at least its rank:
 * abort > stop > reform > checkpoint (a checkpoint must never take the
 * place of an unread stop or re-form: the controller asks for it again).
 * 1: written; 0: kept the unread command. */
int dtshm_offer_cmd (volatile struct dtshm_page *p, int kind, int64_t step);
/* 1 when the slot holds a command the client has not read (its copy in
 * *out), else 0. */
int dtshm_cmd_unread (const volatile struct dtshm_page *p, struct dtshm_cmd *out);
/* The client: cmd_seq read (dtshm_read_cmd), acknowledged in the page. */
void dtshm_ack_cmd (volatile struct dtshm_page *p, uint64_t cmd_seq);

#endif
