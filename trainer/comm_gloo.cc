// comm_gloo.cc: the gloo backend of comm.h - the one C++ file of dttrain.
//
// gloo reports errors as C++ exceptions; every entry point catches them all
// and turns them into -1 + dt_error_t text, so nothing C++ leaks into C.
// Bootstrap is a gloo FileStore over --rendezvous-dir, or a Store that
// forwards to the C callbacks of dt_comm_store_t (the agent's kv).
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

// common/errprintf.h has no extern "C" guard of its own.
extern "C" {
#include "common/errprintf.h"
}
#include "trainer/comm.h"
#include "trainer/comm_shm.h"

namespace {

// ---- collectives that can be aborted ------------------------------------
// gloo (the 2022 snapshot Debian ships) closes a pair whose peer died and
// fails the operations it knows of, but not an unbound buffer's send queued
// behind an unfinished write (its transmit queue signals op.buf, not
// op.ubuf), nor a receive whose message had begun to arrive: such a
// collective waits out the timeout.  A survivor that must re-form cannot
// wait that long, so the buffers gloo's collectives create go through
// AbortContext, which keeps a list of the live ones: dt_comm_abort wakes
// their waits (gloo's own abortWaitSend/abortWaitRecv) and makes every
// later wait return at once, so the collective ends on the closed pair's
// error (or is failed by the caller, who sees the flag).

struct AbortList {
    std::mutex lock;
    std::vector<gloo::transport::UnboundBuffer *> live;
    std::atomic<bool> aborted{ false };
};

class AbortBuffer : public gloo::transport::UnboundBuffer {
  public:
    AbortBuffer (std::unique_ptr<gloo::transport::UnboundBuffer> b,
                 std::shared_ptr<AbortList> l)
      : UnboundBuffer (b->ptr, b->size)
      , b_ (std::move (b))
      , l_ (std::move (l))
    {
        std::lock_guard<std::mutex> g (l_->lock);
        l_->live.push_back (b_.get ());
    }
    ~AbortBuffer () override
    {
        std::lock_guard<std::mutex> g (l_->lock);
        for (auto &x : l_->live)
            if (x == b_.get ()) {
                x = l_->live.back ();
                l_->live.pop_back ();
                break;
            }
    }
    bool waitRecv (int *rank, std::chrono::milliseconds timeout) override
    {
        return !l_->aborted && b_->waitRecv (rank, timeout);
    }
    bool waitSend (int *rank, std::chrono::milliseconds timeout) override
    {
        return !l_->aborted && b_->waitSend (rank, timeout);
    }
    void abortWaitRecv () override
    {
        b_->abortWaitRecv ();
    }
    void abortWaitSend () override
    {
        b_->abortWaitSend ();
    }
    void send (int dst, uint64_t slot, size_t offset, size_t nbytes) override
    {
        b_->send (dst, slot, offset, nbytes);
    }
    void recv (int src, uint64_t slot, size_t offset, size_t nbytes) override
    {
        b_->recv (src, slot, offset, nbytes);
    }
    void recv (std::vector<int> srcs, uint64_t slot, size_t offset,
               size_t nbytes) override
    {
        b_->recv (std::move (srcs), slot, offset, nbytes);
    }

  private:
    std::unique_ptr<gloo::transport::UnboundBuffer> b_;
    std::shared_ptr<AbortList> l_;
};

// The transport context of a connected group, with its buffers wrapped.
class AbortContext : public gloo::transport::Context {
  public:
    AbortContext (std::shared_ptr<gloo::transport::Context> real,
                  std::shared_ptr<AbortList> l)
      : Context (real->rank, real->size)
      , real_ (std::move (real))
      , l_ (std::move (l))
    {
    }
    std::unique_ptr<gloo::transport::Pair> &getPair (int rank) override
    {
        return real_->getPair (rank);
    }
    std::unique_ptr<gloo::transport::Pair> &createPair (int rank) override
    {
        return real_->createPair (rank);
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer (
      void *ptr, size_t size) override
    {
        return std::unique_ptr<gloo::transport::UnboundBuffer> (
          new AbortBuffer (real_->createUnboundBuffer (ptr, size), l_));
    }

  private:
    std::shared_ptr<gloo::transport::Context> real_;
    std::shared_ptr<AbortList> l_;
};

// gloo's context, whose transport context is wrapped once connected.
class DtContext : public gloo::rendezvous::Context {
  public:
    DtContext (int rank, int size)
      : gloo::rendezvous::Context (rank, size)
    {
    }
    void wrap (std::shared_ptr<AbortList> l)
    {
        transportContext_->setTimeout (getTimeout ());
        transportContext_ = std::make_shared<AbortContext> (transportContext_, l);
    }
};

// Forwards gloo's store calls to the C callbacks (agent kv via libdtclient).
class CallbackStore : public gloo::rendezvous::Store {
  public:
    CallbackStore (const dt_comm_store_t *cb, long timeout_ms)
      : cb_ (*cb)
      , timeout_ms_ (timeout_ms)
    {
    }

    void set (const std::string &key, const std::vector<char> &data) override
    {
        if (cb_.set (cb_.ctx, key.c_str (), data.data (), data.size ()) < 0)
            throw std::runtime_error ("rendezvous store: set " + key + " failed");
    }

    std::vector<char> get (const std::string &key) override
    {
        void *val = nullptr;
        size_t len = 0;
        if (cb_.wait (cb_.ctx, key.c_str (), timeout_ms_, &val, &len) < 0)
            throw std::runtime_error ("rendezvous store: timed out waiting for key " +
                                      key);
        std::vector<char> v ((char *)val, (char *)val + len);
        free (val);
        return v;
    }

    void wait (const std::vector<std::string> &keys) override
    {
        wait (keys, std::chrono::milliseconds (timeout_ms_));
    }

    void wait (const std::vector<std::string> &keys,
               const std::chrono::milliseconds &timeout) override
    {
        for (const auto &k : keys) {
            void *val = nullptr;
            size_t len = 0;
            if (cb_.wait (cb_.ctx, k.c_str (), (long)timeout.count (), &val, &len) < 0)
                throw std::runtime_error ("rendezvous store: timed out waiting for key " +
                                          k);
            free (val);
        }
    }

  private:
    dt_comm_store_t cb_;
    long timeout_ms_;
};

struct gloo_comm {
    struct dt_comm base; // must be first
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<DtContext> ctx;
    std::shared_ptr<AbortList> aborts;
    std::chrono::milliseconds timeout;
    uint32_t tag;
    std::vector<float> scratch;
    // peer_addr[j]: the address rank j's pair to us listens on, as gloo
    // prints it in errors ("[127.0.0.1]:43210"), to name a lost peer.
    std::vector<std::string> peer_addr;
    // Posted sends, waited for by g_flush.
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends;
    // Receives posted ahead (g_post_recv), by (peer, slot), waited for by
    // g_recv.
    std::map<std::pair<int, uint64_t>, std::unique_ptr<gloo::transport::UnboundBuffer>>
      posted;
    // Shared-memory links to the peers on this node (comm_shm.c), set up
    // at the first point-to-point operation with a peer; a peer in
    // shm_tried without a link is reached over gloo.  shm_lock guards the
    // map against g_abort from another thread.
    std::map<int, struct shm_link *> shm;
    std::map<int, bool> shm_tried;
    std::mutex shm_lock;
    ~gloo_comm ()
    {
        for (auto &kv : shm)
            shm_link_destroy (kv.second);
    }
};

// A collective of an aborted group fails, before it starts and after
// gloo returns (an aborted wait lets gloo's algorithm run on).
void check_aborted (gloo_comm *g)
{
    if (g->aborts && g->aborts->aborted)
        throw std::runtime_error ("aborted: the group is broken (a peer was lost)");
}

void g_abort (dt_comm_t *c)
{
    gloo_comm *g = (gloo_comm *)c;
    g->aborts->aborted = true;
    std::lock_guard<std::mutex> l (g->aborts->lock);
    for (auto *b : g->aborts->live) {
        b->abortWaitSend ();
        b->abortWaitRecv ();
    }
    std::lock_guard<std::mutex> sl (g->shm_lock);
    for (auto &kv : g->shm)
        shm_link_abort (kv.second);
}

int fail (dt_error_t *err, const char *what, const std::exception &e)
{
    // gloo's messages name the peer address ("Connection closed by peer
    // [127.0.0.1]:43210", "Timed out waiting ... for recv").
    errprintf (err, "gloo %s: %s", what, e.what ());
    errno = EIO;
    return -1;
}

template<typename T>
void set_reduce (gloo::AllreduceOptions &o, enum dt_comm_op op)
{
    if (op == DT_MAX)
        o.setReduceFunction (
          static_cast<void (*) (void *, const void *, const void *, size_t)> (
            &gloo::max<T>));
    else
        o.setReduceFunction (
          static_cast<void (*) (void *, const void *, const void *, size_t)> (
            &gloo::sum<T>));
}

int g_allreduce (dt_comm_t *c, void *buf, size_t n, enum dt_comm_dtype t,
                 enum dt_comm_op op, dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    if (n == 0)
        return 0;
    try {
        gloo::AllreduceOptions o (g->ctx);
        o.setTag (g->tag++);
        o.setTimeout (g->timeout);
        switch (t) {
        case DT_F32:
            o.setOutput ((float *)buf, n);
            set_reduce<float> (o, op);
            break;
        case DT_F64:
            o.setOutput ((double *)buf, n);
            set_reduce<double> (o, op);
            break;
        case DT_I64:
            o.setOutput ((int64_t *)buf, n);
            set_reduce<int64_t> (o, op);
            break;
        }
        o.setAlgorithm (gloo::AllreduceOptions::Algorithm::RING);
        check_aborted (g);
        gloo::allreduce (o);
        check_aborted (g);
    }
    catch (const std::exception &e) {
        return fail (err, "allreduce", e);
    }
    return 0;
}

// gloo 2022 has no reduce-scatter in its options API (only the legacy
// ReduceScatterHalvingDoubling class), so: allreduce in place, keep our
// slice.  Costs one allgather's worth of extra traffic, and makes zero1's
// reduced gradients bit-identical to dp's.
int g_reduce_scatter (dt_comm_t *c, float *in, float *out, const size_t *counts,
                      dt_error_t *err)
{
    size_t total = 0, off = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            off = total;
        total += counts[r];
    }
    if (g_allreduce (c, in, total, DT_F32, DT_SUM, err) < 0)
        return -1;
    if (out != in + off)
        memmove (out, in + off, counts[c->rank] * sizeof (float));
    return 0;
}

int g_allgather (dt_comm_t *c, const float *in, float *out, const size_t *counts,
                 dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        // The input may lie inside the output (our shard of the full
        // parameter buffer): gloo does not promise that works, so copy.
        size_t mine = counts[c->rank];
        g->scratch.assign (in, in + mine);
        std::vector<size_t> cv (counts, counts + c->size);
        gloo::AllgathervOptions o (g->ctx);
        o.setTag (g->tag++);
        o.setTimeout (g->timeout);
        o.setInput (g->scratch.data (), mine);
        o.setOutput (out, cv);
        check_aborted (g);
        gloo::allgatherv (o);
        check_aborted (g);
    }
    catch (const std::exception &e) {
        return fail (err, "allgather", e);
    }
    return 0;
}

int g_broadcast (dt_comm_t *c, void *buf, size_t bytes, int root, dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        gloo::BroadcastOptions o (g->ctx);
        o.setTag (g->tag++);
        o.setTimeout (g->timeout);
        o.setOutput ((uint8_t *)buf, bytes);
        o.setRoot (root);
        check_aborted (g);
        gloo::broadcast (o);
        check_aborted (g);
    }
    catch (const std::exception &e) {
        return fail (err, "broadcast", e);
    }
    return 0;
}

int g_barrier (dt_comm_t *c, dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        gloo::BarrierOptions o (g->ctx);
        o.setTag (g->tag++);
        o.setTimeout (g->timeout);
        check_aborted (g);
        gloo::barrier (o);
        check_aborted (g);
    }
    catch (const std::exception &e) {
        return fail (err, "barrier", e);
    }
    return 0;
}

void g_destroy (dt_comm_t *c)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        delete g;
    }
    catch (...) {
    }
}

int g_peer_of (dt_comm_t *c, const char *errtext)
{
    gloo_comm *g = (gloo_comm *)c;
    for (int j = 0; j < (int)g->peer_addr.size (); j++)
        if (j != c->rank && !g->peer_addr[j].empty () &&
            strstr (errtext, g->peer_addr[j].c_str ()))
            return j;
    return -1;
}

// Every rank learns, for each peer j, the address j's pair to it listens
// on: row r of a W x W table of fixed 64-byte strings, broadcast by r.
void exchange_addresses (gloo_comm *g)
{
    const int W = g->base.size, me = g->base.rank, L = 64;
    std::vector<char> table ((size_t)W * W * L, 0);
    for (int j = 0; j < W; j++)
        if (j != me) {
            std::string a = g->ctx->getPair (j)->address ().str ();
            snprintf (&table[((size_t)me * W + j) * L], L, "%s", a.c_str ());
        }
    for (int r = 0; r < W; r++) {
        gloo::BroadcastOptions o (g->ctx);
        o.setTag (g->tag++);
        o.setTimeout (g->timeout);
        o.setOutput ((uint8_t *)&table[(size_t)r * W * L], (size_t)W * L);
        o.setRoot (r);
        gloo::broadcast (o);
    }
    g->peer_addr.assign (W, std::string ());
    for (int j = 0; j < W; j++)
        if (j != me)
            g->peer_addr[j] = std::string (&table[((size_t)j * W + me) * L]);
}

// Point to point over gloo's unbound buffers.  A send is queued until
// the peer posts the matching recv (gloo's TCP pair never buffers), so
// posting without waiting lets neighbours send to each other at once.
// Slots start at 2^40, far above the collectives' tags.  Between two
// ranks of one node the messages go through a shared-memory ring instead
// (comm_shm.c, set up by shm_for): the send copies into it and returns,
// the recv copies out, in the order sent.
const uint64_t p2p_slot_base = (uint64_t)1 << 40;

// Handshake slots (below p2p_slot_base, far above the collectives' tags).
const uint64_t shm_slot = (uint64_t)1 << 39;

// Sends mine and receives the peer's bytes over gloo (both sides call).
void swap_bytes (gloo_comm *g, int peer, uint64_t slot, const void *mine, void *theirs,
                 size_t n)
{
    auto rb = g->ctx->createUnboundBuffer (theirs, n);
    rb->recv (peer, slot);
    auto sb = g->ctx->createUnboundBuffer ((void *)mine, n);
    sb->send (peer, slot);
    int rank = -1;
    if (!rb->waitRecv (g->timeout) || !sb->waitSend (&rank, g->timeout))
        throw std::runtime_error ("aborted");
}

// The shared-memory link to peer, or nullptr (gloo carries its messages).
// The first call for a peer sets the link up with it: each side creates
// the ring it receives into, the two swap their hellos and then whether
// each could map the other's ring; only when both could is the link used
// (DT_PP_TRANSPORT=gloo: never; =shm: always, or an error).  Both sides
// reach it at their first point-to-point operation with each other.
struct shm_link *shm_for (gloo_comm *g, int peer)
{
    auto it = g->shm_tried.find (peer);
    if (it != g->shm_tried.end ()) {
        auto l = g->shm.find (peer);
        return l == g->shm.end () ? nullptr : l->second;
    }
    g->shm_tried[peer] = true;
    const char *tr = getenv ("DT_PP_TRANSPORT");
    dt_error_t e = {};
    struct shm_hello mine = {}, theirs = {};
    struct shm_link *l = tr && !strcmp (tr, "gloo") ? nullptr : shm_link_create (&e);
    if (l)
        shm_link_hello (l, &mine);
    swap_bytes (g, peer, shm_slot, &mine, &theirs, sizeof (mine));
    uint8_t ok = l && mine.magic && shm_link_attach (l, &theirs, &e) == 0, peer_ok = 0;
    swap_bytes (g, peer, shm_slot + 1, &ok, &peer_ok, 1);
    if (!ok || !peer_ok) {
        shm_link_destroy (l);
        if (tr && !strcmp (tr, "shm")) // required: say why there is none
            throw std::runtime_error (
              std::string ("DT_PP_TRANSPORT=shm: no shared-memory link: ") +
              (!ok ? e.text : "the peer could not map this rank's ring"));
        return nullptr;
    }
    std::lock_guard<std::mutex> sl (g->shm_lock);
    g->shm[peer] = l;
    return l;
}

int g_send (dt_comm_t *c, const void *buf, size_t bytes, int peer, uint64_t slot,
            dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        check_aborted (g);
        struct shm_link *l = shm_for (g, peer);
        dt_error_t e;
        if (l && bytes <= shm_link_max (l) &&
            shm_link_send (l, buf, bytes, slot, (long)g->timeout.count (), &e) < 0)
            throw std::runtime_error (e.text);
        if (l && bytes <= shm_link_max (l))
            return 0;
        check_aborted (g);
        auto ub = g->ctx->createUnboundBuffer ((void *)buf, bytes);
        ub->send (peer, p2p_slot_base + slot);
        g->sends.push_back (std::move (ub));
    }
    catch (const std::exception &e) {
        errprintf (err, "gloo send to peer %d: %s", peer, e.what ());
        errno = EIO;
        return -1;
    }
    return 0;
}

// A receive posted ahead: the sender's send finds it waiting and writes
// at once, so the bytes arrive while this rank computes, instead of a
// round trip (the receiver's notice, the sender's loop thread waking to
// write) when the receiver gets to its recv.
int g_post_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
                 dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        check_aborted (g);
        struct shm_link *l = shm_for (g, peer);
        if (l && bytes <= shm_link_max (l))
            return 0; // the bytes wait in the ring until recv copies them
        auto ub = g->ctx->createUnboundBuffer (buf, bytes);
        ub->recv (peer, p2p_slot_base + slot);
        g->posted[std::make_pair (peer, slot)] = std::move (ub);
    }
    catch (const std::exception &e) {
        errprintf (err, "gloo receive from peer %d: %s", peer, e.what ());
        errno = EIO;
        return -1;
    }
    return 0;
}

int g_recv (dt_comm_t *c, void *buf, size_t bytes, int peer, uint64_t slot,
            dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    try {
        check_aborted (g);
        struct shm_link *l = shm_for (g, peer);
        dt_error_t e;
        if (l && bytes <= shm_link_max (l) &&
            shm_link_recv (l, buf, bytes, slot, (long)g->timeout.count (), &e) < 0)
            throw std::runtime_error (e.text);
        if (l && bytes <= shm_link_max (l))
            return 0;
        std::unique_ptr<gloo::transport::UnboundBuffer> ub;
        auto it = g->posted.find (std::make_pair (peer, slot));
        if (it != g->posted.end ()) {
            ub = std::move (it->second);
            g->posted.erase (it);
        }
        else {
            ub = g->ctx->createUnboundBuffer (buf, bytes);
            ub->recv (peer, p2p_slot_base + slot);
        }
        if (!ub->waitRecv (g->timeout))
            throw std::runtime_error ("receive aborted");
    }
    catch (const std::exception &e) {
        errprintf (err, "gloo receive from peer %d: %s", peer, e.what ());
        errno = EIO;
        return -1;
    }
    return 0;
}

int g_flush (dt_comm_t *c, dt_error_t *err)
{
    gloo_comm *g = (gloo_comm *)c;
    int rank = -1;
    try {
        check_aborted (g);
        for (auto &ub : g->sends)
            if (!ub->waitSend (&rank, g->timeout))
                throw std::runtime_error ("send aborted");
        g->sends.clear ();
    }
    catch (const std::exception &e) {
        g->sends.clear ();
        errprintf (err, "gloo send: %s", e.what ());
        errno = EIO;
        return -1;
    }
    return 0;
}

const struct dt_comm_ops gloo_ops = {
    "gloo",    g_allreduce, g_reduce_scatter, g_allgather, g_broadcast,
    g_barrier, g_destroy,   g_peer_of,        g_send,      g_recv,
    g_flush,   g_post_recv, g_abort,
};

} // namespace

extern "C" dt_comm_t *dt_comm_gloo_create (const struct dt_comm_params *p,
                                           dt_error_t *err)
{
    gloo_comm *g = nullptr;
    try {
        g = new gloo_comm ();
        g->base.ops = &gloo_ops;
        g->base.rank = p->rank;
        g->base.size = p->size;
        g->base.on_wait = nullptr; // dt_comm_set_wait_hook sets it
        g->timeout = std::chrono::milliseconds (p->timeout_ms);
        g->tag = 1;

        gloo::transport::tcp::attr attr;
        attr.hostname = p->host && *p->host ? p->host : "127.0.0.1";
        g->dev = gloo::transport::tcp::CreateDevice (attr);

        std::shared_ptr<gloo::rendezvous::Store> base;
        if (p->rendezvous_dir)
            base = std::make_shared<gloo::rendezvous::FileStore> (p->rendezvous_dir);
        else if (p->store)
            base = std::make_shared<CallbackStore> (p->store, p->timeout_ms);
        else
            throw std::runtime_error (
              "no rendezvous store (need --rendezvous-dir or an agent)");
        gloo::rendezvous::PrefixStore store (p->prefix ? p->prefix : "dttrain", *base);

        g->ctx = std::make_shared<DtContext> (p->rank, p->size);
        g->ctx->setTimeout (g->timeout);
        g->ctx->connectFullMesh (store, g->dev);
        g->aborts = std::make_shared<AbortList> ();
        g->ctx->wrap (g->aborts);
        exchange_addresses (g);
    }
    catch (const std::exception &e) {
        errprintf (err, "gloo init (rank %d of %d): %s", p->rank, p->size, e.what ());
        delete g;
        errno = EIO;
        return nullptr;
    }
    return &g->base;
}
