/* test_dtproto.c: the trainer⇄agent frame codec and the shared-page
 * seqlocks: round trips, and malformed, truncated and oversized input. */
#include <config.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/client/dtclient.h"
#include "agent/client/dtproto.h"
#include "tests/unit/unit.h"

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

/* Decode a whole frame (header + payload). */
static int decode_frame (const uint8_t *f, size_t n, struct dtproto_msg *m, char *err,
                         size_t errlen)
{
    int type;
    uint32_t len;
    if (n < DTPROTO_HDR_LEN)
        return -1;
    if (dtproto_header_decode (f, &type, &len, err, errlen) < 0)
        return -1;
    if (len != n - DTPROTO_HDR_LEN)
        return -1;
    return dtproto_decode (type, f + DTPROTO_HDR_LEN, len, m, err, errlen);
}

static void test_roundtrip_shard (void)
{
    struct dtproto_buf b = { 0 };
    struct dtproto_msg m;
    char err[200];

    dtproto_begin (&b, DTPROTO_SHARD);
    dtproto_add_int (&b, DTPROTO_T_STEP, 130);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/ckpt/4/step-130/rank-2.ckpt");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 1234);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 0xE3069283u);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL (memcmp (b.data, "DTC\x01", 4), 0);
    CU_ASSERT_EQUAL_FATAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);
    CU_ASSERT_EQUAL (m.type, DTPROTO_SHARD);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_STEP], 130);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_BYTES], 1234);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_CRC32C], 0xE3069283LL);
    CU_ASSERT_EQUAL (m.slen[DTPROTO_T_PATH], strlen ("/ckpt/4/step-130/rank-2.ckpt"));
    CU_ASSERT_EQUAL (memcmp (m.s[DTPROTO_T_PATH], "/ckpt/4/step-130/rank-2.ckpt",
                             m.slen[DTPROTO_T_PATH]),
                     0);
    CU_ASSERT_FALSE (dtproto_has (&m, DTPROTO_T_JIT));

    /* A just-in-time shard: the shard's rank and the jit flag. */
    dtproto_begin (&b, DTPROTO_SHARD);
    dtproto_add_int (&b, DTPROTO_T_STEP, 117);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/ckpt/4/jit-117-r0/rank-2.ckpt");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 1234);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 7);
    dtproto_add_int (&b, DTPROTO_T_RANK, 2);
    dtproto_add_int (&b, DTPROTO_T_JIT, 1);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL_FATAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);
    CU_ASSERT (dtproto_has (&m, DTPROTO_T_JIT));
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_JIT], 1);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_RANK], 2);
    dtproto_buf_free (&b);
}

static void test_roundtrip_kv_and_reply (void)
{
    struct dtproto_buf b = { 0 };
    struct dtproto_msg m;
    char err[200];
    uint8_t val[300];
    for (size_t i = 0; i < sizeof (val); i++)
        val[i] = (uint8_t)i; /* includes NUL bytes: values are bytes */

    dtproto_begin (&b, DTPROTO_KV_SET);
    dtproto_add_str (&b, DTPROTO_T_KEY, "gloo/prefix-1:rank.0");
    dtproto_add_bytes (&b, DTPROTO_T_VALUE, val, sizeof (val));
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL_FATAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);
    CU_ASSERT_EQUAL (m.slen[DTPROTO_T_VALUE], sizeof (val));
    CU_ASSERT_EQUAL (memcmp (m.s[DTPROTO_T_VALUE], val, sizeof (val)), 0);

    /* Empty value is allowed. */
    dtproto_begin (&b, DTPROTO_KV_SET);
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    dtproto_add_bytes (&b, DTPROTO_T_VALUE, "", 0);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);

    dtproto_begin (&b, DTPROTO_REPLY);
    dtproto_add_int (&b, DTPROTO_T_STATUS, 6);
    dtproto_add_str (&b, DTPROTO_T_TEXT, "not found");
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL_FATAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_STATUS], 6);
    CU_ASSERT (dtproto_has (&m, DTPROTO_T_TEXT));
    CU_ASSERT (!dtproto_has (&m, DTPROTO_T_VALUE));

    /* Hello, with its negative-number encoding exercised through step. */
    dtproto_begin (&b, DTPROTO_HELLO);
    dtproto_add_int (&b, DTPROTO_T_RANK, 7);
    dtproto_add_int (&b, DTPROTO_T_PID, 4242);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL_FATAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_RANK], 7);
    CU_ASSERT_EQUAL (m.i[DTPROTO_T_PID], 4242);
    dtproto_buf_free (&b);
}

static void test_bad_header (void)
{
    uint8_t h[DTPROTO_HDR_LEN];
    char err[200];
    int type;
    uint32_t len;

    memcpy (h, "DTC\x01", 4);
    put16 (h + 4, DTPROTO_HELLO);
    put16 (h + 6, 0);
    put32 (h + 8, 28);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), 0);

    h[0] = 'X';
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    CU_ASSERT_EQUAL (errno, EPROTO);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "magic"));
    h[0] = 'D';

    h[3] = 2; /* a future version */
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "version 2"));
    h[3] = 1;

    put16 (h + 4, 99);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "unknown message type 99"));
    put16 (h + 4, 0);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    put16 (h + 4, DTPROTO_HELLO);

    put16 (h + 6, 1);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "flags"));
    put16 (h + 6, 0);

    /* Oversized: refused from the header alone, before anything is read. */
    put32 (h + 8, DTPROTO_MAX_PAYLOAD + 1);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "exceeds"));
    put32 (h + 8, 0xffffffffu);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), -1);
    put32 (h + 8, DTPROTO_MAX_PAYLOAD);
    CU_ASSERT_EQUAL (dtproto_header_decode (h, &type, &len, err, sizeof (err)), 0);
    CU_ASSERT_EQUAL (len, DTPROTO_MAX_PAYLOAD);
}

/* Every truncation of a valid payload is refused (never read past the end;
 * run under the sanitizers this also proves no out-of-bounds read). */
static void test_truncated (void)
{
    struct dtproto_buf b = { 0 };
    struct dtproto_msg m;
    char err[200];

    dtproto_begin (&b, DTPROTO_SHARD);
    dtproto_add_int (&b, DTPROTO_T_STEP, 5);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/x/rank-0.ckpt");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 10);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 1);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    size_t plen = b.len - DTPROTO_HDR_LEN;
    for (size_t n = 0; n < plen; n++) {
        uint8_t *copy = malloc (n ? n : 1); /* exact size: ASan catches overreads */
        memcpy (copy, b.data + DTPROTO_HDR_LEN, n);
        int rc = dtproto_decode (DTPROTO_SHARD, copy, n, &m, err, sizeof (err));
        CU_ASSERT_EQUAL (rc, -1);
        if (rc == 0)
            fprintf (stderr, "truncation at %zu accepted\n", n);
        free (copy);
    }
    /* A field whose declared length runs past the payload. */
    dtproto_begin (&b, DTPROTO_KV_GET);
    dtproto_add_str (&b, DTPROTO_T_KEY, "abc");
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    put32 (b.data + DTPROTO_HDR_LEN + 2, 1000);
    CU_ASSERT_EQUAL (dtproto_decode (DTPROTO_KV_GET, b.data + DTPROTO_HDR_LEN,
                                     b.len - DTPROTO_HDR_LEN, &m, err, sizeof (err)),
                     -1);
    CU_ASSERT_PTR_NOT_NULL (strstr (err, "truncated"));
    dtproto_buf_free (&b);
}

static void expect_refused (struct dtproto_buf *b, const char *needle)
{
    struct dtproto_msg m;
    char err[200] = "";
    CU_ASSERT_EQUAL_FATAL (dtproto_end (b), 0);
    CU_ASSERT_EQUAL (decode_frame (b->data, b->len, &m, err, sizeof (err)), -1);
    if (!strstr (err, needle)) {
        fprintf (stderr, "error '%s' does not name '%s'\n", err, needle);
        CU_FAIL ("error text");
    }
}

static void test_malformed (void)
{
    struct dtproto_buf b = { 0 };

    dtproto_begin (&b, DTPROTO_HELLO); /* missing pid */
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    expect_refused (&b, "hello.pid: required field missing");

    dtproto_begin (&b, DTPROTO_HELLO); /* repeated field */
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    dtproto_add_int (&b, DTPROTO_T_RANK, 1);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    expect_refused (&b, "repeated");

    dtproto_begin (&b, DTPROTO_HELLO); /* field of another message */
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    expect_refused (&b, "'key' not allowed");

    dtproto_begin (&b, DTPROTO_SHARD); /* jit is 0 or 1 */
    dtproto_add_int (&b, DTPROTO_T_STEP, 3);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/c/jit-3-r0/rank-1.ckpt");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 10);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 1);
    dtproto_add_int (&b, DTPROTO_T_RANK, 1);
    dtproto_add_int (&b, DTPROTO_T_JIT, 2);
    expect_refused (&b, "shard.jit: 2 is not 0 or 1");

    dtproto_begin (&b, DTPROTO_HELLO); /* jit only in a shard */
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    dtproto_add_int (&b, DTPROTO_T_JIT, 1);
    expect_refused (&b, "'jit' not allowed");

    dtproto_begin (&b, DTPROTO_HELLO); /* unknown tag */
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    dtproto_add_int (&b, 77, 1);
    expect_refused (&b, "unknown field tag 77");

    dtproto_begin (&b, DTPROTO_HELLO); /* int field of the wrong size */
    dtproto_add_bytes (&b, DTPROTO_T_RANK, "\x01\x00\x00\x00", 4);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    expect_refused (&b, "integer field of 4 bytes");

    dtproto_begin (&b, DTPROTO_HELLO); /* negative rank, zero pid */
    dtproto_add_int (&b, DTPROTO_T_RANK, -1);
    dtproto_add_int (&b, DTPROTO_T_PID, 1);
    expect_refused (&b, "hello.rank");
    dtproto_begin (&b, DTPROTO_HELLO);
    dtproto_add_int (&b, DTPROTO_T_RANK, 0);
    dtproto_add_int (&b, DTPROTO_T_PID, 0);
    expect_refused (&b, "hello.pid");

    dtproto_begin (&b, DTPROTO_SHARD); /* NUL inside a string */
    dtproto_add_int (&b, DTPROTO_T_STEP, 1);
    dtproto_add_bytes (&b, DTPROTO_T_PATH, "/a\0b", 4);
    dtproto_add_int (&b, DTPROTO_T_BYTES, 1);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 1);
    expect_refused (&b, "NUL");

    dtproto_begin (&b, DTPROTO_SHARD); /* crc32c out of 32 bits */
    dtproto_add_int (&b, DTPROTO_T_STEP, 1);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/a");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 1);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 0x100000000LL);
    expect_refused (&b, "crc32c");

    dtproto_begin (&b, DTPROTO_SHARD); /* negative step and bytes */
    dtproto_add_int (&b, DTPROTO_T_STEP, -5);
    dtproto_add_str (&b, DTPROTO_T_PATH, "/a");
    dtproto_add_int (&b, DTPROTO_T_BYTES, 1);
    dtproto_add_int (&b, DTPROTO_T_CRC32C, 1);
    expect_refused (&b, "step");

    dtproto_begin (&b, DTPROTO_KV_GET); /* bad key characters */
    dtproto_add_str (&b, DTPROTO_T_KEY, "a b");
    expect_refused (&b, "key");
    dtproto_begin (&b, DTPROTO_KV_GET); /* empty key */
    dtproto_add_str (&b, DTPROTO_T_KEY, "");
    expect_refused (&b, "key");

    dtproto_begin (&b, DTPROTO_RESULT); /* not an object */
    dtproto_add_str (&b, DTPROTO_T_JSON, "[1,2]");
    expect_refused (&b, "not a JSON object");
    dtproto_buf_free (&b);
}

static void test_oversized (void)
{
    struct dtproto_buf b = { 0 };
    struct dtproto_msg m;
    char err[200];
    char key[DTPROTO_MAX_KEY + 2];
    uint8_t *big = calloc (1, DTPROTO_MAX_PAYLOAD + 16);

    memset (key, 'k', sizeof (key) - 1);
    key[sizeof (key) - 1] = '\0';
    dtproto_begin (&b, DTPROTO_KV_GET); /* key of 201 bytes */
    dtproto_add_str (&b, DTPROTO_T_KEY, key);
    expect_refused (&b, "exceeds");
    key[DTPROTO_MAX_KEY] = '\0'; /* 200 is fine */
    dtproto_begin (&b, DTPROTO_KV_GET);
    dtproto_add_str (&b, DTPROTO_T_KEY, key);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);

    dtproto_begin (&b, DTPROTO_KV_SET); /* value of 64 KiB + 1 */
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    dtproto_add_bytes (&b, DTPROTO_T_VALUE, big, DTPROTO_MAX_VALUE + 1);
    expect_refused (&b, "value");
    dtproto_begin (&b, DTPROTO_KV_SET); /* 64 KiB exactly is fine */
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    dtproto_add_bytes (&b, DTPROTO_T_VALUE, big, DTPROTO_MAX_VALUE);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&b), 0);
    CU_ASSERT_EQUAL (decode_frame (b.data, b.len, &m, err, sizeof (err)), 0);

    /* The encoder refuses to build a frame over the limit. */
    dtproto_begin (&b, DTPROTO_KV_SET);
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    dtproto_add_bytes (&b, DTPROTO_T_VALUE, big, DTPROTO_MAX_PAYLOAD);
    CU_ASSERT_EQUAL (dtproto_end (&b), -1);
    CU_ASSERT_EQUAL (errno, EMSGSIZE);

    /* And the decoder a payload over the limit, whatever it holds. */
    CU_ASSERT_EQUAL (dtproto_decode (DTPROTO_KV_SET, big, DTPROTO_MAX_PAYLOAD + 1, &m,
                                     err, sizeof (err)),
                     -1);
    free (big);
    dtproto_buf_free (&b);
}

/* Garbage never crashes the decoder: random payloads for every type. */
static void test_fuzz (void)
{
    struct dtproto_msg m;
    char err[200];
    uint8_t buf[256];
    unsigned seed = 12345;
    int accepted = 0;
    /* A valid payload to mutate: a few changed bytes often still parse,
     * so the checks of what is accepted below do run. */
    struct dtproto_buf v = { 0 };
    dtproto_begin (&v, DTPROTO_SHARD);
    dtproto_add_int (&v, DTPROTO_T_STEP, 5);
    dtproto_add_str (&v, DTPROTO_T_PATH, "/x/rank-0.ckpt");
    dtproto_add_int (&v, DTPROTO_T_BYTES, 10);
    dtproto_add_int (&v, DTPROTO_T_CRC32C, 1);
    CU_ASSERT_EQUAL_FATAL (dtproto_end (&v), 0);
    size_t vlen = v.len - DTPROTO_HDR_LEN;
    CU_ASSERT_FATAL (vlen <= sizeof (buf));
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(rand_r (&seed) % sizeof (buf));
        int type = 1 + iter % DTPROTO_TYPE_MAX;
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)rand_r (&seed);
        /* Small tags and lengths now and then, so some fields parse. */
        if (n >= 6 && (iter & 1)) {
            put16 (buf, (uint16_t)(1 + rand_r (&seed) % DTPROTO_TAG_MAX));
            put32 (buf + 2, (uint32_t)(rand_r (&seed) % 16));
        }
        if (iter % 4 == 3) { /* the valid payload, one byte changed */
            n = vlen;
            memcpy (buf, v.data + DTPROTO_HDR_LEN, n);
            buf[rand_r (&seed) % n] ^= (uint8_t)(1u << (rand_r (&seed) % 8));
            type = DTPROTO_SHARD;
        }
        uint8_t *copy = malloc (n ? n : 1);
        memcpy (copy, buf, n);
        if (dtproto_decode (type, copy, n, &m, err, sizeof (err)) == 0) {
            /* What is accepted points inside the input, never past it. */
            accepted++;
            CU_ASSERT_EQUAL (m.type, type);
            for (int t = 0; t <= DTPROTO_TAG_MAX; t++)
                if (dtproto_has (&m, t) && m.s[t])
                    CU_ASSERT (m.s[t] >= copy && m.s[t] + m.slen[t] <= copy + n);
        }
        free (copy);
    }
    dtproto_buf_free (&v);
    CU_ASSERT (accepted > 0 && accepted < 20000);
}

struct race {
    volatile struct dtshm_page *p;
    volatile int stop;
};

/* The writer keeps step == samples == loss*2; a torn read would break it. */
static void *writer (void *arg)
{
    struct race *r = arg;
    for (int64_t i = 1; !r->stop; i++) {
        volatile struct dtshm_page *p = r->p;
        uint64_t s = p->report.seq;
        __atomic_store_n (&p->report.seq, s + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence (__ATOMIC_RELEASE);
        p->report.step = i;
        p->report.samples = i;
        p->report.loss = (double)i / 2;
        __atomic_store_n (&p->report.seq, s + 2, __ATOMIC_RELEASE);
        dtshm_write_cmd (p, 1, i);
    }
    return NULL;
}

static void test_seqlock (void)
{
    struct dtshm_page *p = aligned_alloc (64, DTSHM_SIZE);
    memset (p, 0, DTSHM_SIZE);
    CU_ASSERT (sizeof (struct dtshm_page) <= DTSHM_SIZE);
    struct race r = { .p = p, .stop = 0 };
    pthread_t t;
    pthread_create (&t, NULL, writer, &r);
    int torn = 0, reads = 0;
    int64_t last = 0;
    for (int i = 0; i < 200000; i++) {
        struct dtshm_report rep;
        struct dtshm_cmd cmd;
        if (dtshm_read_report (p, &rep) == 0) {
            reads++;
            if (rep.step != rep.samples || rep.loss * 2 != (double)rep.step ||
                rep.step < last)
                torn++;
            last = rep.step;
        }
        if (dtshm_read_cmd (p, &cmd) == 0 && cmd.cmd_seq != (uint64_t)cmd.step)
            torn++;
    }
    r.stop = 1;
    pthread_join (t, NULL);
    CU_ASSERT_EQUAL (torn, 0);
    CU_ASSERT (reads > 0);

    /* The waiting count is read whole, outside the seqlock (several
     * threads of a trainer change it). */
    struct dtshm_report rep;
    p->report.waiting = 3;
    CU_ASSERT_EQUAL (dtshm_read_report (p, &rep), 0);
    CU_ASSERT_EQUAL (rep.waiting, 3);
    p->report.waiting = 0;
    CU_ASSERT_EQUAL (dtshm_read_report (p, &rep), 0);
    CU_ASSERT_EQUAL (rep.waiting, 0);

    /* A writer that died mid-write (seq left odd): the reader gives up. */
    p->report.seq = 7;
    CU_ASSERT_EQUAL (dtshm_read_report (p, &rep), -1);
    CU_ASSERT_EQUAL (errno, EAGAIN);

    /* The per-dimension block: its own seqlock; never written reads as
     * step 0 (the agent then sends no "dims"). */
    struct dtshm_dims d;
    CU_ASSERT_EQUAL (dtshm_read_dims (p, &d), 0);
    CU_ASSERT_EQUAL (d.step, 0);
    p->dims.seq = 2;
    p->dims.step = 5;
    p->dims.bytes[2] = 4096;
    p->dims.comm_ms[0] = 1.5;
    p->dims.exposed_ms[1] = 0.25;
    CU_ASSERT_EQUAL (dtshm_read_dims (p, &d), 0);
    CU_ASSERT (d.step == 5 && d.bytes[2] == 4096 && d.comm_ms[0] == 1.5 &&
               d.exposed_ms[1] == 0.25 && d.bytes[0] == 0);
    p->dims.seq = 3;
    CU_ASSERT_EQUAL (dtshm_read_dims (p, &d), -1);
    CU_ASSERT_EQUAL (errno, EAGAIN);
    free (p);
}

/* The page's one command slot: an unread command is replaced only by one
 * that ranks at least as high (abort > stop > reform > checkpoint); once
 * the client acknowledged it, by anything. */
static void test_cmd_priority (void)
{
    struct dtshm_page *p = aligned_alloc (64, DTSHM_SIZE);
    CU_ASSERT_PTR_NOT_NULL_FATAL (p);
    memset (p, 0, DTSHM_SIZE);
    struct dtshm_cmd k;

    /* Checkpoints replace each other unread (the newest step counts). */
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 20), 1);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 40), 1);
    /* An unread re-form outranks a checkpoint: it stays. */
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_REFORM, 2), 1);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 60), 0);
    CU_ASSERT_EQUAL (dtshm_read_cmd (p, &k), 0);
    CU_ASSERT (k.kind == DTCLIENT_CMD_REFORM && k.step == 2 && k.cmd_seq == 3);
    CU_ASSERT_EQUAL (dtshm_cmd_unread (p, &k), 1);
    /* Read and acknowledged: the checkpoint goes in. */
    dtshm_ack_cmd (p, k.cmd_seq);
    CU_ASSERT_EQUAL (dtshm_cmd_unread (p, &k), 0);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 60), 1);
    CU_ASSERT_EQUAL (dtshm_read_cmd (p, &k), 0);
    CU_ASSERT (k.kind == DTCLIENT_CMD_CHECKPOINT && k.step == 60 && k.cmd_seq == 4);
    /* A stop replaces an unread re-form or checkpoint; neither replaces
     * an unread stop; only an abort does. */
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_STOP, 0), 1);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_REFORM, 3), 0);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 80), 0);
    CU_ASSERT_EQUAL (dtshm_read_cmd (p, &k), 0);
    CU_ASSERT (k.kind == DTCLIENT_CMD_STOP && k.cmd_seq == 5);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_ABORT, 0), 1);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_STOP, 0), 0);
    CU_ASSERT_EQUAL (dtshm_read_cmd (p, &k), 0);
    CU_ASSERT (k.kind == DTCLIENT_CMD_ABORT && k.cmd_seq == 6);
    /* An acknowledgement of an older command does not cover a newer one. */
    dtshm_ack_cmd (p, 5);
    CU_ASSERT_EQUAL (dtshm_offer_cmd (p, DTCLIENT_CMD_CHECKPOINT, 100), 0);
    free (p);
}

int main (void)
{
    static const struct dt_unit_test tests[] = {
        { "shard round trip", test_roundtrip_shard },
        { "kv, reply and hello round trips", test_roundtrip_kv_and_reply },
        { "bad headers refused", test_bad_header },
        { "every truncation refused", test_truncated },
        { "malformed payloads refused with the field named", test_malformed },
        { "oversized keys, values and payloads refused", test_oversized },
        { "random payloads never crash the decoder", test_fuzz },
        { "seqlock reads are never torn", test_seqlock },
        { "an unread command is replaced only by one that outranks it",
          test_cmd_priority },
        { NULL, NULL },
    };
    return dt_unit_run ("dtproto", tests);
}
