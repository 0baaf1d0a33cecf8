/* hbparse.c: heartbeat bodies without a JSON tree (see hbparse.h). */
#include <config.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jsonx.h"
#include "orchestrator/hbparse.h"

/* Field limits of the contract (schemas/agent-api.md), shared by both paths. */
static const size_t hb_node_max = 63;
static const size_t hb_state_max = 15;
static const json_int_t hb_local_rank_max = 1 << 20;
static const json_int_t hb_pid_max = 0x7fffffff;
static const double hb_ms_max = 1e12;
static const double hb_bytes_max = 1e18;

void hb_msg_init (struct hb_msg *m)
{
    memset (m, 0, sizeof (*m));
}

void hb_msg_free (struct hb_msg *m)
{
    if (m) {
        free (m->ranks);
        hb_msg_init (m);
    }
}

/* The next free rank entry, zeroed; NULL when out of memory. */
static struct hb_rank *rank_next (struct hb_msg *m)
{
    if (m->nranks == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct hb_rank *p = realloc (m->ranks, cap * sizeof (*p));
        if (!p)
            return NULL;
        m->ranks = p;
        m->cap = cap;
    }
    struct hb_rank *r = &m->ranks[m->nranks++];
    memset (r, 0, sizeof (*r));
    return r;
}

/* --- the fast path ------------------------------------------------------------- */

/* A cursor over the body.  Every helper returns false for "not handled",
 * and the caller gives up: the general path then decides. */
struct cur {
    const char *p, *end;
};

static inline void skip_ws (struct cur *c)
{
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

static inline bool eat (struct cur *c, char ch)
{
    skip_ws (c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static inline bool peek (struct cur *c, char ch)
{
    skip_ws (c);
    return c->p < c->end && *c->p == ch;
}

static bool word (struct cur *c, const char *w, size_t n)
{
    skip_ws (c);
    if ((size_t)(c->end - c->p) < n || memcmp (c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* A string of printable ASCII without escapes (node names, states, keys);
 * anything else is left to jansson's UTF-8 and escape handling.  *s points
 * into the body. */
static bool string (struct cur *c, const char **s, size_t *n)
{
    if (!eat (c, '"'))
        return false;
    const char *b = c->p;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch == '"') {
            *s = b;
            *n = c->p - b;
            c->p++;
            return true;
        }
        if (ch < 0x20 || ch >= 0x7f || ch == '\\')
            return false;
        c->p++;
    }
    return false;
}

/* "null": the value of an optional field that is not given. */
static bool null (struct cur *c)
{
    return word (c, "null", 4);
}

static bool boolean (struct cur *c, bool *b)
{
    if (word (c, "true", 4)) {
        *b = true;
        return true;
    }
    if (word (c, "false", 5)) {
        *b = false;
        return true;
    }
    return false;
}

/* Exact powers of ten (the ones a double holds exactly). */
static const double pow10_exact[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A JSON number, with the grammar jansson's lexer has.  An integer token
 * (no fraction, no exponent) of at most 18 digits sets *is_int and *i;
 * every number sets *d (an integer's as (double)*i, as jansson's
 * json_number_value).  Longer integers (jansson: "too big integer" or a
 * value near the limits) and reals that strtod calls out of range are not
 * handled here. */
static bool number (struct cur *c, bool *is_int, int64_t *i, double *d)
{
    skip_ws (c);
    const char *b = c->p, *q = c->p;
    bool neg = false;
    int64_t mant = 0;
    int ndig = 0, nfrac = 0;

    if (q < c->end && *q == '-') {
        neg = true;
        q++;
    }
    if (q >= c->end || *q < '0' || *q > '9')
        return false;
    if (*q == '0') {
        q++;
        if (q < c->end && *q >= '0' && *q <= '9')
            return false; /* leading zero: invalid JSON */
    }
    else {
        while (q < c->end && *q >= '0' && *q <= '9') {
            if (++ndig > 18)
                return false;
            mant = mant * 10 + (*q - '0');
            q++;
        }
    }
    bool integer = true;
    if (q < c->end && *q == '.') {
        integer = false;
        q++;
        if (q >= c->end || *q < '0' || *q > '9')
            return false;
        while (q < c->end && *q >= '0' && *q <= '9') {
            if (++ndig > 18)
                mant = -1; /* too long for the exact path below */
            else
                mant = mant * 10 + (*q - '0');
            nfrac++;
            q++;
        }
    }
    bool exp = false;
    if (q < c->end && (*q == 'e' || *q == 'E')) {
        integer = false;
        exp = true;
        q++;
        if (q < c->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= c->end || *q < '0' || *q > '9')
            return false;
        while (q < c->end && *q >= '0' && *q <= '9')
            q++;
    }
    c->p = q;
    *is_int = integer;
    if (integer) {
        *i = neg ? -mant : mant;
        *d = (double)*i;
        return true;
    }
    /* m / 10^k with m < 2^53 and k <= 22 is one correctly rounded
     * division of two exact doubles: strtod's result (Clinger's fast
     * path).  Otherwise strtod itself, on a NUL-terminated copy. */
    if (!exp && mant >= 0 && mant < (INT64_C (1) << 53) && nfrac <= 22) {
        double v = (double)mant / pow10_exact[nfrac];
        *d = neg ? -v : v;
        return true;
    }
    char tmp[64];
    size_t n = q - b;
    if (n >= sizeof (tmp))
        return false;
    memcpy (tmp, b, n);
    tmp[n] = '\0';
    errno = 0;
    double v = strtod (tmp, NULL);
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL))
        return false; /* jansson: "real number overflow" */
    *d = v;
    return true;
}

static bool int_in (struct cur *c, int64_t min, int64_t max, int64_t *out)
{
    bool is_int;
    double d;
    return number (c, &is_int, out, &d) && is_int && *out >= min && *out <= max;
}

static bool real_in (struct cur *c, double min, double max, double *out)
{
    bool is_int;
    int64_t i;
    return number (c, &is_int, &i, out) && isfinite (*out) && *out >= min && *out <= max;
}

/* "dims": [bytes, comm_ms, exposed_ms] of tp, pp and dp, nine numbers >= 0. */
static bool dims_array (struct cur *c, double *dims)
{
    if (!eat (c, '['))
        return false;
    for (int d = 0; d < HB_NDIMS; d++)
        if ((d && !eat (c, ',')) ||
            !real_in (c, 0, d % 3 ? hb_ms_max : hb_bytes_max, &dims[d]))
            return false;
    return eat (c, ']');
}

enum { K_RANK = 1 << 20 }; /* above the enum hb_field bits */

/* One rank entry: the keys of hb_rank_keys (agentapi.c's contract) once
 * each, "rank" required, null = not given for the others. */
static bool rank_entry (struct cur *c, int world_size, struct hb_rank *r)
{
    unsigned seen = 0;
    const char *k;
    size_t kn;

    if (!eat (c, '{'))
        return false;
    if (eat (c, '}'))
        return false; /* "rank" missing */
    do {
        unsigned bit;
        int64_t i;
        if (!string (c, &k, &kn) || !eat (c, ':'))
            return false;
#define KEY(s) (kn == sizeof (s) - 1 && !memcmp (k, s, kn))
        if (KEY ("rank"))
            bit = K_RANK;
        else if (KEY ("local_rank"))
            bit = HB_LOCAL_RANK;
        else if (KEY ("pid"))
            bit = HB_PID;
        else if (KEY ("state"))
            bit = HB_STATE;
        else if (KEY ("client"))
            bit = HB_CLIENT;
        else if (KEY ("step"))
            bit = HB_STEP;
        else if (KEY ("loss"))
            bit = HB_LOSS;
        else if (KEY ("samples"))
            bit = HB_SAMPLES;
        else if (KEY ("compute_ms"))
            bit = HB_COMPUTE_MS;
        else if (KEY ("comm_ms"))
            bit = HB_COMM_MS;
        else if (KEY ("busy"))
            bit = HB_BUSY;
        else if (KEY ("waiting"))
            bit = HB_WAITING;
        else if (KEY ("stopped"))
            bit = HB_STOPPED;
        else if (KEY ("dims"))
            bit = HB_DIMS;
        else
            return false; /* unknown field */
#undef KEY
        if (seen & bit)
            return false; /* duplicate key */
        seen |= bit;
        if (bit != K_RANK && null (c))
            continue;
        switch (bit) {
        case K_RANK:
            if (!int_in (c, 0, (int64_t)world_size - 1, &i))
                return false;
            r->rank = i;
            break;
        case HB_LOCAL_RANK:
            if (!int_in (c, 0, hb_local_rank_max, &i))
                return false;
            r->local_rank = i;
            break;
        case HB_PID:
            if (!int_in (c, 0, hb_pid_max, &i))
                return false;
            r->pid = i;
            break;
        case HB_STATE: {
            const char *s;
            size_t n;
            if (!string (c, &s, &n) || n == 0 || n > hb_state_max)
                return false;
            memcpy (r->state, s, n);
            r->state[n] = '\0';
            break;
        }
        case HB_CLIENT:
        case HB_BUSY:
        case HB_WAITING:
        case HB_STOPPED:
            if (!boolean (c, bit == HB_CLIENT    ? &r->client
                             : bit == HB_BUSY    ? &r->busy
                             : bit == HB_WAITING ? &r->waiting
                                                 : &r->stopped))
                return false;
            break;
        case HB_STEP:
            if (!int_in (c, -1, INT64_MAX, &r->step))
                return false;
            break;
        case HB_SAMPLES:
            if (!int_in (c, -1, INT64_MAX, &r->samples))
                return false;
            break;
        case HB_LOSS:
            if (!real_in (c, -INFINITY, INFINITY, &r->loss))
                return false;
            break;
        case HB_COMPUTE_MS:
            if (!real_in (c, 0, hb_ms_max, &r->compute_ms))
                return false;
            break;
        case HB_COMM_MS:
            if (!real_in (c, 0, hb_ms_max, &r->comm_ms))
                return false;
            break;
        case HB_DIMS:
            if (!dims_array (c, r->dims))
                return false;
            break;
        }
        r->has |= bit & ~K_RANK;
    } while (eat (c, ','));
    return (seen & K_RANK) && eat (c, '}');
}

int hb_parse_fast (const char *body, size_t len, int world_size, struct hb_msg *m)
{
    struct cur c = { body, body + len };
    bool have_node = false, have_ranks = false;
    const char *k, *s;
    size_t kn, n;

    m->node[0] = '\0';
    m->nranks = 0;
    m->nunheard = 0;
    if (!body || !eat (&c, '{') || peek (&c, '}'))
        return 0;
    do {
        if (!string (&c, &k, &kn) || !eat (&c, ':'))
            return 0;
        if (kn == 4 && !memcmp (k, "node", 4)) {
            if (have_node || !string (&c, &s, &n) || n == 0 || n > hb_node_max)
                return 0;
            memcpy (m->node, s, n);
            m->node[n] = '\0';
            have_node = true;
        }
        else if (kn == 5 && !memcmp (k, "ranks", 5)) {
            if (have_ranks || !eat (&c, '['))
                return 0;
            have_ranks = true;
            if (eat (&c, ']'))
                continue;
            do {
                struct hb_rank *r = rank_next (m);
                if (!r)
                    return -1;
                if (!rank_entry (&c, world_size, r))
                    return 0;
            } while (eat (&c, ','));
            if (!eat (&c, ']'))
                return 0;
        }
        else
            return 0;
    } while (eat (&c, ','));
    if (!eat (&c, '}') || !have_node || !have_ranks)
        return 0;
    skip_ws (&c);
    return c.p == c.end ? 1 : 0;
}

/* --- the general path ------------------------------------------------------------ */

static const char *const hb_keys[] = { "node", "ranks", "unheard", NULL };
static const char *const hb_unheard_keys[] = { "node", "relay", "ms", "closed", NULL };

/* "unheard": absent, null, or at most HB_UNHEARD_MAX objects, each with
 * exactly one of "node" and "relay", "ms" >= 0, and "closed" (a boolean,
 * with "node" only).  0 or -1 with err. */
static int unheard_get (const json_t *root, struct hb_msg *m, dt_error_t *err)
{
    json_t *a = json_object_get (root, "unheard"), *u;
    char path[64];
    size_t i;
    m->nunheard = 0;
    if (!a || json_is_null (a))
        return 0;
    if (!json_is_array (a) || json_array_size (a) > HB_UNHEARD_MAX)
        return errnoprintf (err, EPROTO,
                            "unheard: expected an array of at most %d objects",
                            HB_UNHEARD_MAX);
    json_array_foreach (a, i, u)
    {
        struct hb_unheard *e = &m->unheard[i];
        const char *node = NULL, *relay = NULL;
        json_int_t ms;
        bool closed = false;
        dt_json_path_index (path, sizeof (path), "unheard", i);
        if (dt_json_check_object (u, path, hb_unheard_keys, err) < 0 ||
            dt_json_get_str (u, path, "node", false, hb_node_max, false, &node, err) <
              0 ||
            dt_json_get_str (u, path, "relay", false, sizeof (e->relay) - 1, false,
                             &relay, err) < 0 ||
            dt_json_get_int (u, path, "ms", true, 0, INT64_MAX, &ms, err) < 0 ||
            dt_json_get_bool (u, path, "closed", false, &closed, err) < 0)
            return -1;
        if (!node == !relay)
            return errnoprintf (err, EPROTO, "%s: expected exactly one of node and relay",
                                path);
        if (closed && relay)
            return errnoprintf (err, EPROTO,
                                "%s.closed: only a child (node) can be closed", path);
        snprintf (e->node, sizeof (e->node), "%s", node ? node : "");
        snprintf (e->relay, sizeof (e->relay), "%s", relay ? relay : "");
        e->ms = ms;
        e->closed = closed;
        m->nunheard++;
    }
    return 0;
}
static const char *const hb_rank_keys[] = {
    "rank",       "local_rank", "pid",  "state",   "client",  "step", "loss", "samples",
    "compute_ms", "comm_ms",    "busy", "waiting", "stopped", "dims", NULL,
};

/* Is 'key' of 'o' given (present and not null)? */
static bool given (const json_t *o, const char *key)
{
    json_t *v = json_object_get (o, key);
    return v && !json_is_null (v);
}

/* "dims": absent, null, or nine numbers >= 0 (bytes, comm_ms, exposed_ms
 * of tp, pp, dp).  0 or -1 with err. */
static int dims_get (const json_t *r, const char *path, double *dims, dt_error_t *err)
{
    json_t *a = json_object_get (r, "dims");
    memset (dims, 0, HB_NDIMS * sizeof (double));
    if (!a || json_is_null (a))
        return 0;
    if (!json_is_array (a) || json_array_size (a) != HB_NDIMS)
        return errnoprintf (err, EPROTO, "%s.dims: expected an array of %d numbers", path,
                            HB_NDIMS);
    for (int d = 0; d < HB_NDIMS; d++) {
        json_t *v = json_array_get (a, d);
        double max = d % 3 ? hb_ms_max : hb_bytes_max;
        if (!json_is_number (v) || json_number_value (v) < 0 ||
            json_number_value (v) > max)
            return errnoprintf (err, EPROTO, "%s.dims[%d]: expected a number in [0, %g]",
                                path, d, max);
        dims[d] = json_number_value (v);
    }
    return 0;
}

enum hb_result hb_parse_general (const char *body, size_t len, int world_size,
                                 struct hb_msg *m, dt_error_t *err)
{
    enum hb_result rc = HB_ERR_FIELD;
    json_t *root, *ranks, *r;
    const char *node;
    char path[64];
    size_t i;

    m->node[0] = '\0';
    m->nranks = 0;
    m->nunheard = 0;
    if (!body || len == 0) {
        errnoprintf (err, EPROTO, "expected a JSON object");
        return HB_ERR_BODY;
    }
    if (!(root = dt_json_parse (body, len, err)))
        return HB_ERR_BODY;
    if (!json_is_object (root)) {
        json_decref (root);
        errnoprintf (err, EPROTO, "expected a JSON object");
        return HB_ERR_BODY;
    }
    if (dt_json_check_object (root, "", hb_keys, err) < 0 ||
        dt_json_get_str (root, "", "node", true, hb_node_max, false, &node, err) < 0 ||
        dt_json_get_arr (root, "", "ranks", true, &ranks, err) < 0)
        goto done;
    if (unheard_get (root, m, err) < 0)
        goto done;
    snprintf (m->node, sizeof (m->node), "%s", node);
    json_array_foreach (ranks, i, r)
    {
        json_int_t rank, lr = 0, pid = 0, step = 0, samples = 0;
        double loss = 0, comp = 0, comm = 0;
        bool client = false, busy = false, waiting = false, stopped = false;
        const char *st = NULL;
        dt_json_path_index (path, sizeof (path), "ranks", i);
        if (dt_json_check_object (r, path, hb_rank_keys, err) < 0 ||
            dt_json_get_int (r, path, "rank", true, 0, (json_int_t)world_size - 1, &rank,
                             err) < 0 ||
            dt_json_get_int (r, path, "local_rank", false, 0, hb_local_rank_max, &lr,
                             err) < 0 ||
            dt_json_get_int (r, path, "pid", false, 0, hb_pid_max, &pid, err) < 0 ||
            dt_json_get_str (r, path, "state", false, hb_state_max, false, &st, err) <
              0 ||
            dt_json_get_bool (r, path, "client", false, &client, err) < 0 ||
            dt_json_get_bool (r, path, "busy", false, &busy, err) < 0 ||
            dt_json_get_bool (r, path, "waiting", false, &waiting, err) < 0 ||
            dt_json_get_bool (r, path, "stopped", false, &stopped, err) < 0 ||
            dt_json_get_int (r, path, "step", false, -1, INT64_MAX, &step, err) < 0 ||
            dt_json_get_int (r, path, "samples", false, -1, INT64_MAX, &samples, err) <
              0 ||
            dt_json_get_real (r, path, "loss", false, -INFINITY, INFINITY, &loss, err) <
              0 ||
            dt_json_get_real (r, path, "compute_ms", false, 0, hb_ms_max, &comp, err) <
              0 ||
            dt_json_get_real (r, path, "comm_ms", false, 0, hb_ms_max, &comm, err) < 0)
            goto done;
        double dims[HB_NDIMS];
        if (dims_get (r, path, dims, err) < 0)
            goto done;
        struct hb_rank *e = rank_next (m);
        if (!e) {
            errnoprintf (err, ENOMEM, "out of memory");
            rc = HB_ERR_NOMEM;
            goto done;
        }
        e->rank = rank;
        e->local_rank = lr;
        e->pid = pid;
        e->step = step;
        e->samples = samples;
        e->loss = loss;
        e->compute_ms = comp;
        e->comm_ms = comm;
        memcpy (e->dims, dims, sizeof (dims));
        e->client = client;
        e->busy = busy;
        e->waiting = waiting;
        e->stopped = stopped;
        if (st)
            snprintf (e->state, sizeof (e->state), "%s", st);
        static const struct {
            const char *key;
            unsigned bit;
        } opt[] = {
            { "local_rank", HB_LOCAL_RANK },
            { "pid", HB_PID },
            { "state", HB_STATE },
            { "client", HB_CLIENT },
            { "step", HB_STEP },
            { "loss", HB_LOSS },
            { "samples", HB_SAMPLES },
            { "compute_ms", HB_COMPUTE_MS },
            { "comm_ms", HB_COMM_MS },
            { "busy", HB_BUSY },
            { "waiting", HB_WAITING },
            { "stopped", HB_STOPPED },
            { "dims", HB_DIMS },
        };
        for (size_t k = 0; k < sizeof (opt) / sizeof (opt[0]); k++)
            if (given (r, opt[k].key))
                e->has |= opt[k].bit;
    }
    rc = HB_OK;
done:
    json_decref (root);
    return rc;
}

enum hb_result hb_parse (const char *body, size_t len, int world_size, struct hb_msg *m,
                         dt_error_t *err)
{
    int rc = hb_parse_fast (body, len, world_size, m);
    if (rc == 1)
        return HB_OK;
    if (rc < 0) {
        errnoprintf (err, ENOMEM, "out of memory");
        return HB_ERR_NOMEM;
    }
    return hb_parse_general (body, len, world_size, m, err);
}
