/* test_chan.c: the agent's trainer socket (agent/chan.c) with the real
 * libdtclient in child processes over a real Unix socket: hello, kv
 * set/get/wait, shard, result, commands through the shared page, malformed
 * frames refused without harm, and a trainer exiting when the agent's
 * socket closes. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/chan.h"
#include "agent/client/dtclient.h"
#include "agent/client/dtproto.h"
#include "tests/unit/unit.h"

static char dir[64], sock_path[100], shm_path[100];
static volatile struct dtshm_page *page;

/* What the handler saw. */
static int hellos, shards, results, late_gets;
static char kv_key[256];
static uint8_t kv_val[1024];
static size_t kv_len = (size_t)-1;
static int64_t shard_step, shard_crc;

static int64_t now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void handler (const struct dtproto_msg *m, int *conn_rank,
                     struct dtproto_buf *reply, void *arg)
{
    char key[DTPROTO_MAX_KEY + 1] = "";
    if (dtproto_has (m, DTPROTO_T_KEY)) {
        memcpy (key, m->s[DTPROTO_T_KEY], m->slen[DTPROTO_T_KEY]);
        key[m->slen[DTPROTO_T_KEY]] = '\0';
    }
    switch (m->type) {
    case DTPROTO_HELLO:
        if (m->i[DTPROTO_T_RANK] != 3) {
            chan_reply_status (reply, DTCLIENT_ERR_INVAL, "rank is not of this node");
            return;
        }
        *conn_rank = (int)m->i[DTPROTO_T_RANK];
        hellos++;
        break;
    case DTPROTO_KV_SET:
        snprintf (kv_key, sizeof (kv_key), "%s", key);
        kv_len = m->slen[DTPROTO_T_VALUE];
        memcpy (kv_val, m->s[DTPROTO_T_VALUE], kv_len);
        break;
    case DTPROTO_KV_GET:
        if (strcmp (key, "late") == 0 && ++late_gets >= 3) {
            dtproto_begin (reply, DTPROTO_REPLY);
            dtproto_add_int (reply, DTPROTO_T_STATUS, DTCLIENT_OK);
            dtproto_add_bytes (reply, DTPROTO_T_VALUE, "now", 3);
            return;
        }
        if (strcmp (key, kv_key) != 0 || kv_len == (size_t)-1) {
            chan_reply_status (reply, DTCLIENT_ERR_NOTFOUND, NULL);
            return;
        }
        dtproto_begin (reply, DTPROTO_REPLY);
        dtproto_add_int (reply, DTPROTO_T_STATUS, DTCLIENT_OK);
        dtproto_add_bytes (reply, DTPROTO_T_VALUE, kv_val, kv_len);
        return;
    case DTPROTO_SHARD:
        shards++;
        shard_step = m->i[DTPROTO_T_STEP];
        shard_crc = m->i[DTPROTO_T_CRC32C];
        break;
    case DTPROTO_RESULT:
        results++;
        /* Answer with a command in the page, as the agent does. */
        dtshm_write_cmd (page, DTCLIENT_CMD_CHECKPOINT, 42);
        break;
    default: break;
    }
    chan_reply_status (reply, DTCLIENT_OK, NULL);
}

/* Run the chan until 'pid' exits or timeout; returns its wait status or -1. */
static int serve_until_exit (chan_t *c, pid_t pid, int timeout_ms)
{
    int64_t end = now_ms () + timeout_ms;
    struct pollfd pfd[64];
    while (now_ms () < end) {
        int status;
        if (waitpid (pid, &status, WNOHANG) == pid)
            return status;
        int n = chan_pollfds (c, pfd, 64);
        if (poll (pfd, (nfds_t)n, 20) > 0)
            chan_process (c, pfd, n);
    }
    kill (pid, SIGKILL);
    waitpid (pid, NULL, 0);
    return -1;
}

static volatile struct dtshm_page *make_page (void)
{
    int fd = open (shm_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL (fd >= 0);
    CU_ASSERT_FATAL (ftruncate (fd, DTSHM_SIZE) == 0);
    struct dtshm_page *p =
      mmap (NULL, DTSHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close (fd);
    CU_ASSERT_FATAL (p != MAP_FAILED);
    p->version = DTPROTO_VERSION;
    p->rank = 3;
    p->magic = DTSHM_MAGIC;
    return p;
}

/* The trainer side: every check is one bit of the exit status. */
static int client_main (void)
{
    int bad = 0;
    void *v = NULL;
    size_t n = 0;
    dtclient_cmd_t cmd;
    setenv ("DT_AGENT_SOCKET", sock_path, 1);
    setenv ("DT_AGENT_SHM", shm_path, 1);
    setenv ("RANK", "3", 1);
    dtclient_t *c = dtclient_open ();
    if (!c || !dtclient_connected (c))
        return 1;
    dtclient_step (c, 17, 0.5, 640, 0.040, 0.003);
    if (dtclient_kv_set (c, "gloo/0:addr", "\x00\x01xyz", 5) != DTCLIENT_OK)
        bad |= 2;
    if (dtclient_kv_get (c, "gloo/0:addr", &v, &n) != DTCLIENT_OK || n != 5 ||
        memcmp (v, "\x00\x01xyz", 5) != 0)
        bad |= 4;
    free (v);
    if (dtclient_kv_get (c, "missing", &v, &n) != DTCLIENT_ERR_NOTFOUND)
        bad |= 8;
    if (dtclient_kv_wait (c, "late", 5000, &v, &n) != DTCLIENT_OK || n != 3 ||
        memcmp (v, "now", 3) != 0)
        bad |= 16;
    else
        free (v);
    if (dtclient_kv_set (c, "bad key", "x", 1) != DTCLIENT_ERR_INVAL)
        bad |= 32;
    if (dtclient_shard_written (c, 130, "/ckpt/step-130/rank-3.ckpt", 99, 0xdeadbeefu) !=
        DTCLIENT_OK)
        bad |= 32;
    if (dtclient_poll (c, &cmd) != 0)
        bad |= 64;
    if (dtclient_result (c, "[1]") != DTCLIENT_ERR_INVAL ||
        dtclient_result (c, "{\"steps\": 17}") != DTCLIENT_OK)
        bad |= 64;
    int64_t end = now_ms () + 5000;
    int got = 0;
    while (!got && now_ms () < end)
        got = dtclient_poll (c, &cmd);
    if (!got || cmd.kind != DTCLIENT_CMD_CHECKPOINT || cmd.step != 42 || cmd.seq != 1)
        bad |= 128;
    if (dtclient_poll (c, &cmd) != 0) /* not returned twice */
        bad |= 128;
    dtclient_close (c);
    return bad;
}

static void test_client_exchange (void)
{
    dt_error_t err;
    page = make_page ();
    chan_t *c = chan_create (sock_path, handler, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    pid_t pid = fork ();
    if (pid == 0)
        _exit (client_main ());
    int status = serve_until_exit (c, pid, 20000);
    CU_ASSERT (WIFEXITED (status));
    if (WEXITSTATUS (status) != 0)
        fprintf (stderr, "client checks failed: mask 0x%x\n", WEXITSTATUS (status));
    CU_ASSERT_EQUAL (WEXITSTATUS (status), 0);
    CU_ASSERT_EQUAL (hellos, 1);
    CU_ASSERT_EQUAL (shards, 1);
    CU_ASSERT_EQUAL (shard_step, 130);
    CU_ASSERT_EQUAL (shard_crc, 0xdeadbeefLL);
    CU_ASSERT_EQUAL (results, 1);
    /* The step report reached the page without any message. */
    struct dtshm_report rep;
    CU_ASSERT_EQUAL (dtshm_read_report (page, &rep), 0);
    CU_ASSERT_EQUAL (rep.step, 17);
    CU_ASSERT_EQUAL (rep.samples, 640);
    CU_ASSERT (rep.compute_ms > 39.9 && rep.compute_ms < 40.1);
    CU_ASSERT_EQUAL (rep.nreports, 1);
    /* The client acknowledged the command it read: the agent may now
     * replace it with any other. */
    CU_ASSERT_EQUAL (page->cmd_read, 1);
    chan_destroy (c);
    munmap ((void *)page, DTSHM_SIZE);
}

static int raw_connect (void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    snprintf (sun.sun_path, sizeof (sun.sun_path), "%s", sock_path);
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect (fd, (struct sockaddr *)&sun, sizeof (sun)) < 0)
        return -1;
    return fd;
}

/* Read one reply; its status, or -1 on EOF/garbage. */
static int raw_reply (int fd)
{
    uint8_t hdr[DTPROTO_HDR_LEN], payload[8192];
    int type;
    uint32_t len;
    struct dtproto_msg m;
    if (recv (fd, hdr, sizeof (hdr), MSG_WAITALL) != (ssize_t)sizeof (hdr) ||
        dtproto_header_decode (hdr, &type, &len, NULL, 0) < 0 || len > sizeof (payload) ||
        (len && recv (fd, payload, len, MSG_WAITALL) != (ssize_t)len) ||
        dtproto_decode (type, payload, len, &m, NULL, 0) < 0 || type != DTPROTO_REPLY)
        return -1;
    return (int)m.i[DTPROTO_T_STATUS];
}

/* A hostile trainer: every bad frame gets a PROTO refusal, the agent
 * side carries on.  Bit per failed check. */
static int raw_main (void)
{
    int bad = 0;
    struct dtproto_buf b = { 0 };
    uint8_t junk[64];
    memset (junk, 'x', sizeof (junk));

    /* 1. Garbage header: refused, then the connection is closed. */
    int fd = raw_connect ();
    if (fd < 0)
        return 1;
    if (write (fd, junk, sizeof (junk)) != (ssize_t)sizeof (junk))
        bad |= 1;
    if (raw_reply (fd) != DTCLIENT_ERR_PROTO)
        bad |= 2;
    char x;
    if (recv (fd, &x, 1, MSG_WAITALL) > 0) /* EOF (or ECONNRESET: junk left unread) */
        bad |= 2;
    close (fd);

    /* 2. Oversized length in the header: refused before it is read. */
    fd = raw_connect ();
    dtproto_begin (&b, DTPROTO_KV_SET);
    dtproto_end (&b);
    b.data[8] = 0xff, b.data[9] = 0xff, b.data[10] = 0xff, b.data[11] = 0x7f;
    if (write (fd, b.data, b.len) != (ssize_t)b.len ||
        raw_reply (fd) != DTCLIENT_ERR_PROTO)
        bad |= 4;
    close (fd);

    /* 3. Bad payload (truncated field): refused, connection kept; a request
     *    before hello is refused; a good hello then works. */
    fd = raw_connect ();
    dtproto_begin (&b, DTPROTO_HELLO);
    dtproto_add_int (&b, DTPROTO_T_RANK, 3);
    dtproto_add_int (&b, DTPROTO_T_PID, getpid ());
    dtproto_end (&b);
    b.data[DTPROTO_HDR_LEN + 2] = 200; /* the rank field claims 200 bytes */
    if (write (fd, b.data, b.len) != (ssize_t)b.len ||
        raw_reply (fd) != DTCLIENT_ERR_PROTO)
        bad |= 8;
    dtproto_begin (&b, DTPROTO_KV_GET);
    dtproto_add_str (&b, DTPROTO_T_KEY, "k");
    dtproto_end (&b);
    if (write (fd, b.data, b.len) != (ssize_t)b.len ||
        raw_reply (fd) != DTCLIENT_ERR_PROTO)
        bad |= 16;
    dtproto_begin (&b, DTPROTO_HELLO);
    dtproto_add_int (&b, DTPROTO_T_RANK, 9); /* not ours */
    dtproto_add_int (&b, DTPROTO_T_PID, getpid ());
    dtproto_end (&b);
    if (write (fd, b.data, b.len) != (ssize_t)b.len ||
        raw_reply (fd) != DTCLIENT_ERR_INVAL)
        bad |= 32;
    dtproto_begin (&b, DTPROTO_HELLO);
    dtproto_add_int (&b, DTPROTO_T_RANK, 3);
    dtproto_add_int (&b, DTPROTO_T_PID, getpid ());
    dtproto_end (&b);
    if (write (fd, b.data, b.len) != (ssize_t)b.len || raw_reply (fd) != DTCLIENT_OK)
        bad |= 64;
    /* 4. A half frame then hang-up: the agent side just drops it. */
    if (write (fd, b.data, 5) != 5)
        bad |= 128;
    close (fd);
    dtproto_buf_free (&b);
    return bad;
}

static void test_malformed_frames (void)
{
    dt_error_t err;
    hellos = 0;
    chan_t *c = chan_create (sock_path, handler, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    pid_t pid = fork ();
    if (pid == 0)
        _exit (raw_main ());
    int status = serve_until_exit (c, pid, 20000);
    CU_ASSERT (WIFEXITED (status));
    if (WEXITSTATUS (status) != 0)
        fprintf (stderr, "raw checks failed: mask 0x%x\n", WEXITSTATUS (status));
    CU_ASSERT_EQUAL (WEXITSTATUS (status), 0);
    CU_ASSERT_EQUAL (hellos, 1);
    /* Serve a moment longer so the half frame's hang-up is processed. */
    struct pollfd pfd[64];
    for (int i = 0; i < 10; i++) {
        int n = chan_pollfds (c, pfd, 64);
        if (poll (pfd, (nfds_t)n, 20) > 0)
            chan_process (c, pfd, n);
    }
    CU_ASSERT_EQUAL (chan_connections (c), 0);
    chan_destroy (c);
}

/* A trainer whose agent's socket closes exits (with its process group). */
static void test_orphan_exits (void)
{
    dt_error_t err;
    page = make_page ();
    chan_t *c = chan_create (sock_path, handler, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    int pipefd[2];
    CU_ASSERT_FATAL (pipe (pipefd) == 0);
    pid_t pid = fork ();
    if (pid == 0) {
        setpgid (0, 0);
        setenv ("DT_AGENT_SOCKET", sock_path, 1);
        setenv ("DT_AGENT_SHM", shm_path, 1);
        setenv ("RANK", "3", 1);
        dtclient_t *dc = dtclient_open ();
        char ok = dtclient_connected (dc) ? 'y' : 'n';
        if (write (pipefd[1], &ok, 1) != 1)
            _exit (3);
        sleep (30);
        _exit (0); /* only reached if the watcher failed */
    }
    close (pipefd[1]);
    /* Serve until the child says it connected. */
    struct pollfd pfd[64];
    char ok = 0;
    int64_t end = now_ms () + 10000;
    while (now_ms () < end) {
        int n = chan_pollfds (c, pfd, 63);
        pfd[n] = (struct pollfd){ .fd = pipefd[0], .events = POLLIN };
        if (poll (pfd, (nfds_t)n + 1, 50) > 0) {
            chan_process (c, pfd, n);
            if (pfd[n].revents && read (pipefd[0], &ok, 1) == 1)
                break;
        }
    }
    CU_ASSERT_EQUAL (ok, 'y');
    chan_destroy (c); /* the "agent" goes away */
    int status = 0;
    pid_t w = 0;
    end = now_ms () + 3000;
    while (now_ms () < end && (w = waitpid (pid, &status, WNOHANG)) == 0)
        usleep (10000);
    CU_ASSERT_EQUAL (w, pid);
    if (w != pid) {
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
    }
    else
        CU_ASSERT (WIFSIGNALED (status) ||
                   (WIFEXITED (status) && WEXITSTATUS (status) == 1));
    close (pipefd[0]);
    munmap ((void *)page, DTSHM_SIZE);
}

/* No agent: the no-op client; kv through DT_RENDEZVOUS_DIR files. */
static void test_noop_client (void)
{
    void *v = NULL;
    size_t n = 0;
    dtclient_cmd_t cmd;
    unsetenv ("DT_AGENT_SOCKET");
    unsetenv ("DT_AGENT_SHM");
    unsetenv ("DT_RENDEZVOUS_DIR");
    dtclient_t *c = dtclient_open ();
    CU_ASSERT_PTR_NOT_NULL_FATAL (c);
    CU_ASSERT_EQUAL (dtclient_connected (c), 0);
    dtclient_step (c, 1, 1.0, 1, 0.1, 0.0);
    CU_ASSERT_EQUAL (dtclient_poll (c, &cmd), 0);
    CU_ASSERT_EQUAL (dtclient_shard_written (c, 1, "/x", 1, 1), DTCLIENT_OK);
    CU_ASSERT_EQUAL (dtclient_result (c, "{}"), DTCLIENT_OK);
    CU_ASSERT_EQUAL (dtclient_kv_set (c, "k", "v", 1), DTCLIENT_ERR_NOAGENT);
    dtclient_close (c);

    char rdv[300];
    snprintf (rdv, sizeof (rdv), "%s/rdv", dir);
    CU_ASSERT_FATAL (mkdir (rdv, 0700) == 0);
    setenv ("DT_RENDEZVOUS_DIR", rdv, 1);
    c = dtclient_open ();
    CU_ASSERT_EQUAL (dtclient_kv_get (c, "a/b", &v, &n), DTCLIENT_ERR_NOTFOUND);
    CU_ASSERT_EQUAL (dtclient_kv_wait (c, "a/b", 50, &v, &n), DTCLIENT_ERR_TIMEOUT);
    CU_ASSERT_EQUAL (dtclient_kv_set (c, "a/b", "value\0x", 7), DTCLIENT_OK);
    CU_ASSERT_EQUAL_FATAL (dtclient_kv_wait (c, "a/b", 1000, &v, &n), DTCLIENT_OK);
    CU_ASSERT_EQUAL (n, 7);
    CU_ASSERT_EQUAL (memcmp (v, "value\0x", 7), 0);
    free (v);
    CU_ASSERT_EQUAL (dtclient_kv_set (c, "../escape", "v", 1),
                     DTCLIENT_OK); /* '.' ok, '/' escaped */
    char esc[400];
    snprintf (esc, sizeof (esc), "%s/..%%2Fescape", rdv);
    CU_ASSERT_EQUAL (access (esc, F_OK), 0);
    dtclient_close (c);
    unsetenv ("DT_RENDEZVOUS_DIR");
    CU_ASSERT_STRING_EQUAL (dtclient_strerror (DTCLIENT_ERR_NOTFOUND), "key not found");
}

int main (void)
{
    static const struct dt_unit_test tests[] = {
        { "libdtclient exchanges with the agent socket", test_client_exchange },
        { "malformed frames are refused, the agent side survives",
          test_malformed_frames },
        { "a trainer exits when the agent's socket closes", test_orphan_exits },
        { "no agent: no-op client, kv in DT_RENDEZVOUS_DIR", test_noop_client },
        { NULL, NULL },
    };
    snprintf (dir, sizeof (dir), "/tmp/test_chan.XXXXXX");
    if (!mkdtemp (dir))
        return 99;
    snprintf (sock_path, sizeof (sock_path), "%s/agent.sock", dir);
    snprintf (shm_path, sizeof (shm_path), "%s/rank-3.shm", dir);
    signal (SIGPIPE, SIG_IGN);
    int rc = dt_unit_run ("chan", tests);
    char cmd[400];
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    if (system (cmd) != 0)
        rc = rc ? rc : 99;
    return rc;
}
