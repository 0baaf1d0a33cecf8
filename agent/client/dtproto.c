/* dtproto.c: encoder/decoder of the trainer⇄agent frames and the seqlock
 * accessors of the shared-memory page (see dtproto.h). */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtclient.h"
#include "dtproto.h"

static int fail (char *err, size_t errlen, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static int fail (char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err, errlen, fmt, ap);
        va_end (ap);
    }
    errno = EPROTO;
    return -1;
}

static uint16_t get16 (const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32 (const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint64_t get64 (const uint8_t *p)
{
    return (uint64_t)get32 (p) | ((uint64_t)get32 (p + 4) << 32);
}

static void put16 (uint8_t *p, uint16_t v)
{
    p[0] = v & 0xff;
    p[1] = v >> 8;
}

static void put32 (uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (v >> (8 * i)) & 0xff;
}

static void put64 (uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (v >> (8 * i)) & 0xff;
}

static const char *type_name (int type)
{
    static const char *names[] = {
        "?",      "hello", "shard",     "shard_failed", "result", "kv_set",
        "kv_get", "reply", "integrity", "perf",         "caps",   "numerics",
    };
    return type >= 1 && type <= DTPROTO_TYPE_MAX ? names[type] : "?";
}

static const char *tag_name (int tag)
{
    static const char *names[] = {
        "?",    "rank", "pid",   "step",   "path", "bytes", "crc32c",
        "text", "key",  "value", "status", "json", "jit",
    };
    return tag >= 1 && tag <= DTPROTO_TAG_MAX ? names[tag] : "?";
}

enum { K_INT = 1, K_STR = 2, K_BYTES = 3 };

static const int tag_kind[DTPROTO_TAG_MAX + 1] = {
    [DTPROTO_T_RANK] = K_INT,   [DTPROTO_T_PID] = K_INT,   [DTPROTO_T_STEP] = K_INT,
    [DTPROTO_T_PATH] = K_STR,   [DTPROTO_T_BYTES] = K_INT, [DTPROTO_T_CRC32C] = K_INT,
    [DTPROTO_T_TEXT] = K_STR,   [DTPROTO_T_KEY] = K_STR,   [DTPROTO_T_VALUE] = K_BYTES,
    [DTPROTO_T_STATUS] = K_INT, [DTPROTO_T_JSON] = K_STR,  [DTPROTO_T_JIT] = K_INT,
};

static const size_t tag_max[DTPROTO_TAG_MAX + 1] = {
    [DTPROTO_T_PATH] = DTPROTO_MAX_PATH,  [DTPROTO_T_TEXT] = DTPROTO_MAX_TEXT,
    [DTPROTO_T_KEY] = DTPROTO_MAX_KEY,    [DTPROTO_T_VALUE] = DTPROTO_MAX_VALUE,
    [DTPROTO_T_JSON] = DTPROTO_MAX_VALUE,
};

#define B(t) (1u << (t))
/* Per type: fields required and fields allowed (required ⊆ allowed). */
static const uint32_t type_required[DTPROTO_TYPE_MAX + 1] = {
    [DTPROTO_HELLO] = B (DTPROTO_T_RANK) | B (DTPROTO_T_PID),
    [DTPROTO_SHARD] = B (DTPROTO_T_STEP) | B (DTPROTO_T_PATH) | B (DTPROTO_T_BYTES) |
                      B (DTPROTO_T_CRC32C),
    [DTPROTO_SHARD_FAILED] = B (DTPROTO_T_STEP) | B (DTPROTO_T_TEXT),
    [DTPROTO_RESULT] = B (DTPROTO_T_JSON),
    [DTPROTO_KV_SET] = B (DTPROTO_T_KEY) | B (DTPROTO_T_VALUE),
    [DTPROTO_KV_GET] = B (DTPROTO_T_KEY),
    [DTPROTO_REPLY] = B (DTPROTO_T_STATUS),
    [DTPROTO_INTEGRITY] = B (DTPROTO_T_JSON),
    [DTPROTO_PERF] = B (DTPROTO_T_JSON),
    [DTPROTO_CAPS] = B (DTPROTO_T_JSON),
    [DTPROTO_NUMERICS] = B (DTPROTO_T_JSON),
};
static const uint32_t type_optional[DTPROTO_TYPE_MAX + 1] = {
    /* A just-in-time shard is written by a surviving rank for
     * every rank: 'rank' names the shard's rank, 'jit' marks it. */
    [DTPROTO_SHARD] = B (DTPROTO_T_RANK) | B (DTPROTO_T_JIT),
    [DTPROTO_REPLY] = B (DTPROTO_T_TEXT) | B (DTPROTO_T_VALUE),
};

int dtproto_header_decode (const uint8_t *hdr, int *type, uint32_t *len, char *err,
                           size_t errlen)
{
    if (memcmp (hdr, "DTC", 3) != 0)
        return fail (err, errlen, "bad magic %02x%02x%02x (not a dtclient frame)", hdr[0],
                     hdr[1], hdr[2]);
    if (hdr[3] != DTPROTO_VERSION)
        return fail (err, errlen, "protocol version %u not supported (want %u)", hdr[3],
                     DTPROTO_VERSION);
    int t = get16 (hdr + 4);
    if (t < 1 || t > DTPROTO_TYPE_MAX)
        return fail (err, errlen, "unknown message type %d", t);
    if (get16 (hdr + 6) != 0)
        return fail (err, errlen, "%s: reserved flags 0x%x not zero", type_name (t),
                     get16 (hdr + 6));
    uint32_t n = get32 (hdr + 8);
    if (n > DTPROTO_MAX_PAYLOAD)
        return fail (err, errlen, "%s: payload of %u bytes exceeds the limit of %u",
                     type_name (t), n, (unsigned)DTPROTO_MAX_PAYLOAD);
    *type = t;
    *len = n;
    return 0;
}

int dtproto_key_valid (const char *key, size_t len)
{
    if (len < 1 || len > DTPROTO_MAX_KEY)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' || c == '/' ||
              c == '-'))
            return 0;
    }
    return 1;
}

int dtproto_decode (int type, const uint8_t *payload, size_t len, struct dtproto_msg *m,
                    char *err, size_t errlen)
{
    memset (m, 0, sizeof (*m));
    if (type < 1 || type > DTPROTO_TYPE_MAX)
        return fail (err, errlen, "unknown message type %d", type);
    if (len > DTPROTO_MAX_PAYLOAD)
        return fail (err, errlen, "%s: payload of %zu bytes exceeds the limit",
                     type_name (type), len);
    m->type = type;
    uint32_t allowed = type_required[type] | type_optional[type];
    size_t off = 0;
    while (off < len) {
        if (len - off < DTPROTO_FIELD_HDR_LEN)
            return fail (err, errlen, "%s: truncated field header at offset %zu",
                         type_name (type), off);
        int tag = get16 (payload + off);
        uint32_t n = get32 (payload + off + 2);
        off += DTPROTO_FIELD_HDR_LEN;
        if (tag < 1 || tag > DTPROTO_TAG_MAX)
            return fail (err, errlen, "%s: unknown field tag %d", type_name (type), tag);
        if (!(allowed & B (tag)))
            return fail (err, errlen, "%s: field '%s' not allowed in this message",
                         type_name (type), tag_name (tag));
        if (m->present & B (tag))
            return fail (err, errlen, "%s.%s: field repeated", type_name (type),
                         tag_name (tag));
        if (n > len - off)
            return fail (err, errlen, "%s.%s: truncated (%u bytes declared, %zu left)",
                         type_name (type), tag_name (tag), n, len - off);
        const uint8_t *v = payload + off;
        off += n;
        if (tag_kind[tag] == K_INT) {
            if (n != 8)
                return fail (err, errlen, "%s.%s: integer field of %u bytes (want 8)",
                             type_name (type), tag_name (tag), n);
            m->i[tag] = (int64_t)get64 (v);
        }
        else {
            if (n > tag_max[tag])
                return fail (err, errlen, "%s.%s: %u bytes exceeds the limit of %zu",
                             type_name (type), tag_name (tag), n, tag_max[tag]);
            if (tag_kind[tag] == K_STR && memchr (v, 0, n))
                return fail (err, errlen, "%s.%s: string contains a NUL byte",
                             type_name (type), tag_name (tag));
            m->s[tag] = v;
            m->slen[tag] = n;
        }
        m->present |= B (tag);
    }
    uint32_t missing = type_required[type] & ~m->present;
    if (missing) {
        for (int t = 1; t <= DTPROTO_TAG_MAX; t++)
            if (missing & B (t))
                return fail (err, errlen, "%s.%s: required field missing",
                             type_name (type), tag_name (t));
    }
    /* Range checks of the int fields that have a meaning. */
    if (dtproto_has (m, DTPROTO_T_RANK) &&
        (m->i[DTPROTO_T_RANK] < 0 || m->i[DTPROTO_T_RANK] > INT32_MAX))
        return fail (err, errlen, "%s.rank: %lld out of range", type_name (type),
                     (long long)m->i[DTPROTO_T_RANK]);
    if (dtproto_has (m, DTPROTO_T_PID) &&
        (m->i[DTPROTO_T_PID] <= 0 || m->i[DTPROTO_T_PID] > INT32_MAX))
        return fail (err, errlen, "%s.pid: %lld out of range", type_name (type),
                     (long long)m->i[DTPROTO_T_PID]);
    if (dtproto_has (m, DTPROTO_T_STEP) && m->i[DTPROTO_T_STEP] < 0)
        return fail (err, errlen, "%s.step: %lld is negative", type_name (type),
                     (long long)m->i[DTPROTO_T_STEP]);
    if (dtproto_has (m, DTPROTO_T_BYTES) && m->i[DTPROTO_T_BYTES] < 0)
        return fail (err, errlen, "%s.bytes: %lld is negative", type_name (type),
                     (long long)m->i[DTPROTO_T_BYTES]);
    if (dtproto_has (m, DTPROTO_T_CRC32C) &&
        (m->i[DTPROTO_T_CRC32C] < 0 || m->i[DTPROTO_T_CRC32C] > 0xffffffffLL))
        return fail (err, errlen, "%s.crc32c: %lld is not a 32-bit value",
                     type_name (type), (long long)m->i[DTPROTO_T_CRC32C]);
    if (dtproto_has (m, DTPROTO_T_JIT) && m->i[DTPROTO_T_JIT] != 0 &&
        m->i[DTPROTO_T_JIT] != 1)
        return fail (err, errlen, "%s.jit: %lld is not 0 or 1", type_name (type),
                     (long long)m->i[DTPROTO_T_JIT]);
    if (dtproto_has (m, DTPROTO_T_PATH) && m->slen[DTPROTO_T_PATH] == 0)
        return fail (err, errlen, "%s.path: empty", type_name (type));
    if (dtproto_has (m, DTPROTO_T_KEY) &&
        !dtproto_key_valid ((const char *)m->s[DTPROTO_T_KEY], m->slen[DTPROTO_T_KEY]))
        return fail (err, errlen, "%s.key: not a valid key ([A-Za-z0-9_.:/-]{1,200})",
                     type_name (type));
    if (dtproto_has (m, DTPROTO_T_JSON)) {
        const uint8_t *j = m->s[DTPROTO_T_JSON];
        size_t jn = m->slen[DTPROTO_T_JSON];
        while (jn > 0 && (*j == ' ' || *j == '\n' || *j == '\t' || *j == '\r'))
            j++, jn--;
        if (jn == 0 || *j != '{')
            return fail (err, errlen, "%s.json: not a JSON object", type_name (type));
    }
    return 0;
}

/* ---- encoding ------------------------------------------------------------ */

static uint8_t *reserve (struct dtproto_buf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (b->len + n > DTPROTO_HDR_LEN + DTPROTO_MAX_PAYLOAD) {
        b->failed = EMSGSIZE;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc (b->data, cap);
        if (!d) {
            b->failed = ENOMEM;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

void dtproto_begin (struct dtproto_buf *b, int type)
{
    b->len = 0;
    b->failed = 0;
    uint8_t *p = reserve (b, DTPROTO_HDR_LEN);
    if (!p)
        return;
    memcpy (p, "DTC", 3);
    p[3] = DTPROTO_VERSION;
    put16 (p + 4, (uint16_t)type);
    put16 (p + 6, 0);
    put32 (p + 8, 0);
}

void dtproto_add_int (struct dtproto_buf *b, int tag, int64_t v)
{
    uint8_t *p = reserve (b, DTPROTO_FIELD_HDR_LEN + 8);
    if (!p)
        return;
    put16 (p, (uint16_t)tag);
    put32 (p + 2, 8);
    put64 (p + 6, (uint64_t)v);
}

void dtproto_add_bytes (struct dtproto_buf *b, int tag, const void *v, size_t n)
{
    if (n > DTPROTO_MAX_PAYLOAD) {
        b->failed = EMSGSIZE;
        return;
    }
    uint8_t *p = reserve (b, DTPROTO_FIELD_HDR_LEN + n);
    if (!p)
        return;
    put16 (p, (uint16_t)tag);
    put32 (p + 2, (uint32_t)n);
    if (n)
        memcpy (p + 6, v, n);
}

void dtproto_add_str (struct dtproto_buf *b, int tag, const char *s)
{
    dtproto_add_bytes (b, tag, s, strlen (s));
}

int dtproto_end (struct dtproto_buf *b)
{
    if (b->failed || b->len < DTPROTO_HDR_LEN) {
        errno = b->failed ? b->failed : EINVAL;
        return -1;
    }
    put32 (b->data + 8, (uint32_t)(b->len - DTPROTO_HDR_LEN));
    return 0;
}

void dtproto_buf_free (struct dtproto_buf *b)
{
    free (b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- shared-memory seqlocks ---------------------------------------------- */

#define LOAD_ACQ(p) __atomic_load_n ((p), __ATOMIC_ACQUIRE)
#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause ()
#else
#define CPU_RELAX() __atomic_signal_fence (__ATOMIC_SEQ_CST)
#endif
/* A writer that dies between its two stores leaves 'seq' odd for ever: the
 * reader gives up after this many tries instead of spinning (a write is a
 * few stores long, so a live writer never needs that many). */
#define SEQLOCK_TRIES 100000
#define STORE_REL(p, v) __atomic_store_n ((p), (v), __ATOMIC_RELEASE)

int dtshm_read_report (const volatile struct dtshm_page *p, struct dtshm_report *out)
{
    for (int tries = 0; tries < SEQLOCK_TRIES; tries++) {
        uint64_t s1 = LOAD_ACQ (&p->report.seq);
        if (s1 & 1) {
            CPU_RELAX ();
            continue;
        }
        out->step = p->report.step;
        out->loss = p->report.loss;
        out->samples = p->report.samples;
        out->compute_ms = p->report.compute_ms;
        out->comm_ms = p->report.comm_ms;
        out->nreports = p->report.nreports;
        out->busy = p->report.busy;
        __atomic_thread_fence (__ATOMIC_ACQUIRE);
        if (__atomic_load_n (&p->report.seq, __ATOMIC_RELAXED) == s1) {
            out->seq = s1;
            /* A counter of its own, outside the seqlock (see dtproto.h). */
            out->waiting = __atomic_load_n (&p->report.waiting, __ATOMIC_RELAXED);
            return 0;
        }
    }
    errno = EAGAIN;
    return -1;
}

int dtshm_read_dims (const volatile struct dtshm_page *p, struct dtshm_dims *out)
{
    for (int tries = 0; tries < SEQLOCK_TRIES; tries++) {
        uint64_t s1 = LOAD_ACQ (&p->dims.seq);
        if (s1 & 1) {
            CPU_RELAX ();
            continue;
        }
        out->step = p->dims.step;
        for (int d = 0; d < DTSHM_NDIMS; d++) {
            out->bytes[d] = p->dims.bytes[d];
            out->comm_ms[d] = p->dims.comm_ms[d];
            out->exposed_ms[d] = p->dims.exposed_ms[d];
        }
        __atomic_thread_fence (__ATOMIC_ACQUIRE);
        if (__atomic_load_n (&p->dims.seq, __ATOMIC_RELAXED) == s1) {
            out->seq = s1;
            return 0;
        }
    }
    errno = EAGAIN;
    return -1;
}

int dtshm_read_cmd (const volatile struct dtshm_page *p, struct dtshm_cmd *out)
{
    for (int tries = 0; tries < SEQLOCK_TRIES; tries++) {
        uint64_t s1 = LOAD_ACQ (&p->cmd.seq);
        if (s1 & 1) {
            CPU_RELAX ();
            continue;
        }
        out->cmd_seq = p->cmd.cmd_seq;
        out->kind = p->cmd.kind;
        out->step = p->cmd.step;
        __atomic_thread_fence (__ATOMIC_ACQUIRE);
        if (__atomic_load_n (&p->cmd.seq, __ATOMIC_RELAXED) == s1) {
            out->seq = s1;
            return 0;
        }
    }
    errno = EAGAIN;
    return -1;
}

void dtshm_write_cmd (volatile struct dtshm_page *p, int kind, int64_t step)
{
    uint64_t s = p->cmd.seq;
    __atomic_store_n (&p->cmd.seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence (__ATOMIC_RELEASE);
    p->cmd.kind = kind;
    p->cmd.step = step;
    p->cmd.cmd_seq = p->cmd.cmd_seq + 1;
    STORE_REL (&p->cmd.seq, s + 2);
}

/* A command kind's rank for dtshm_offer_cmd (unknown kinds: the lowest). */
static int cmd_rank (int kind)
{
    switch (kind) {
    case DTCLIENT_CMD_ABORT: return 4;
    case DTCLIENT_CMD_STOP: return 3;
    case DTCLIENT_CMD_REFORM: return 2;
    case DTCLIENT_CMD_CHECKPOINT: return 1;
    default: return 0;
    }
}

int dtshm_offer_cmd (volatile struct dtshm_page *p, int kind, int64_t step)
{
    /* (only the agent writes the command half: no read can race a write) */
    uint64_t read = __atomic_load_n (&p->cmd_read, __ATOMIC_ACQUIRE);
    if (p->cmd.cmd_seq > read && cmd_rank (p->cmd.kind) > cmd_rank (kind))
        return 0;
    dtshm_write_cmd (p, kind, step);
    return 1;
}

int dtshm_cmd_unread (const volatile struct dtshm_page *p, struct dtshm_cmd *out)
{
    uint64_t read = __atomic_load_n (&p->cmd_read, __ATOMIC_ACQUIRE);
    return dtshm_read_cmd (p, out) == 0 && out->cmd_seq > read;
}

void dtshm_ack_cmd (volatile struct dtshm_page *p, uint64_t cmd_seq)
{
    __atomic_store_n (&p->cmd_read, cmd_seq, __ATOMIC_RELEASE);
}
