/* node.c: node identity and host facts for the agent's registration. */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "node.h"

/* The primary address: the first non-loopback IPv4 address of an
 * interface that is up.  Under the testbed each netns has one veth, so this
 * is the address the other nodes reach; on a laptop it is the LAN address
 * (reachable from itself too).  127.0.0.1 when there is nothing else. */
static void primary_addr (char *buf, size_t len)
{
    struct ifaddrs *ifa = NULL;
    snprintf (buf, len, "127.0.0.1");
    if (getifaddrs (&ifa) < 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
            continue;
        struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
        inet_ntop (AF_INET, &sin->sin_addr, buf, (socklen_t)len);
        break;
    }
    freeifaddrs (ifa);
}

/* A port the kernel says is free now.  It is released before the trainers
 * bind it, so there is a window for another process to take it; the
 * ephemeral range makes that unlikely and a rank failing to bind is an
 * ordinary rank_exit that the controller restarts. */
static int free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };
    sin.sin_addr.s_addr = htonl (INADDR_ANY);
    socklen_t sl = sizeof (sin);
    if (bind (fd, (struct sockaddr *)&sin, sizeof (sin)) < 0 ||
        getsockname (fd, (struct sockaddr *)&sin, &sl) < 0) {
        close (fd);
        return -1;
    }
    close (fd);
    return ntohs (sin.sin_port);
}

static int env_int (const char *name, int64_t *out)
{
    const char *s = getenv (name);
    char *end;
    if (!s || !*s)
        return 0;
    errno = 0;
    long long v = strtoll (s, &end, 10);
    if (errno || *end || v < 0)
        return -1;
    *out = v;
    return 1;
}

int node_detect (struct node_info *ni, const char *opt_name, int opt_order,
                 dt_error_t *err)
{
    memset (ni, 0, sizeof (*ni));
    const char *s = getenv ("SLURMD_NODENAME");
    if (s && *s)
        snprintf (ni->name, sizeof (ni->name), "%s", s);
    else if (opt_name && *opt_name)
        snprintf (ni->name, sizeof (ni->name), "%s", opt_name);
    else if (gethostname (ni->name, sizeof (ni->name) - 1) < 0)
        snprintf (ni->name, sizeof (ni->name), "localhost");

    int64_t v = 0;
    int rc = env_int ("SLURM_NODEID", &v);
    if (rc < 0 || v > 1000000)
        return errnoprintf (err, EINVAL, "SLURM_NODEID=%s: not a node index",
                            getenv ("SLURM_NODEID"));
    ni->order = rc > 0 ? (int)v : (opt_order >= 0 ? opt_order : 0);
    if (env_int ("SLURM_JOB_ID", &ni->slurm_job_id) < 0)
        ni->slurm_job_id = 0;
    if (env_int ("SLURM_STEP_ID", &ni->slurm_step_id) < 0)
        ni->slurm_step_id = 0;

    primary_addr (ni->addr, sizeof (ni->addr));
    ni->port = free_port ();
    if (ni->port < 0)
        return errnoprintf (err, errno, "no free TCP port for the master: %s",
                            strerror (errno));
    return 0;
}

static void cpu_model (char *buf, size_t len)
{
    char line[512];
    snprintf (buf, len, "unknown");
    FILE *f = fopen ("/proc/cpuinfo", "r");
    if (!f)
        return;
    while (fgets (line, sizeof (line), f)) {
        if (strncmp (line, "model name", 10) == 0) {
            char *p = strchr (line, ':');
            if (p) {
                p++;
                while (*p == ' ' || *p == '\t')
                    p++;
                p[strcspn (p, "\n")] = '\0';
                snprintf (buf, len, "%s", p);
            }
            break;
        }
    }
    fclose (f);
}

/* The first line of a command's output containing 'key' (or the first line
 * when key is NULL), after 'key', trimmed; "" when the command is absent.
 * Only at registration, and only for tools that answer quickly. */
static void cmd_line (const char *cmd, const char *key, char *buf, size_t len)
{
    char line[512];
    FILE *f = popen (cmd, "r");
    buf[0] = '\0';
    if (!f)
        return;
    while (fgets (line, sizeof (line), f)) {
        char *p = key ? strstr (line, key) : line;
        if (!p)
            continue;
        p += key ? strlen (key) : 0;
        while (*p == ' ' || *p == ':')
            p++;
        p[strcspn (p, "\n|")] = '\0';
        for (size_t n = strlen (p); n > 0 && p[n - 1] == ' '; n--)
            p[n - 1] = '\0';
        if (!buf[0])
            snprintf (buf, len, "%s", p);
    }
    pclose (f);
}

/* NCCL's version from its library's file name (libnccl.so.2.18.3). */
static void nccl_version (char *buf, size_t len)
{
    static const char *const dirs[] = { "/usr/lib/x86_64-linux-gnu",
                                        "/usr/lib/aarch64-linux-gnu",
                                        "/usr/local/cuda/lib64",
                                        "/usr/lib64",
                                        "/usr/local/lib",
                                        NULL };
    buf[0] = '\0';
    for (int i = 0; dirs[i] && !buf[0]; i++) {
        DIR *d = opendir (dirs[i]);
        struct dirent *e;
        if (!d)
            continue;
        while ((e = readdir (d))) {
            /* the longest name is the full version */
            if (!strncmp (e->d_name, "libnccl.so.", 11) &&
                strlen (e->d_name + 11) > strlen (buf))
                snprintf (buf, len, "%s", e->d_name + 11);
        }
        closedir (d);
    }
}

/* GPU model, driver and CUDA versions (nvidia-smi), NCCL, and the Slurm
 * version (srun --version) for the run record; empty strings
 * where absent. */
static void host_versions (json_t *hi, bool have_gpus)
{
    char b[256];
    const char *sv = getenv ("SLURM_VERSION");
    if ((!sv || !*sv) && getenv ("SLURM_JOB_ID")) {
        cmd_line ("srun --version 2>/dev/null", "slurm", b, sizeof (b));
        json_object_set_new (hi, "slurm_version", json_string (b));
    }
    if (have_gpus) {
        cmd_line ("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", NULL,
                  b, sizeof (b));
        json_object_set_new (hi, "gpu_model", json_string (b));
        cmd_line (
          "nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", NULL,
          b, sizeof (b));
        json_object_set_new (hi, "gpu_driver", json_string (b));
        cmd_line ("nvidia-smi 2>/dev/null", "CUDA Version", b, sizeof (b));
        json_object_set_new (hi, "cuda_version", json_string (b));
    }
    nccl_version (b, sizeof (b));
    json_object_set_new (hi, "nccl_version", json_string (b));
}

json_t *node_hostinfo (void)
{
    char model[256];
    cpu_model (model, sizeof (model));
    long pages = sysconf (_SC_PHYS_PAGES), psz = sysconf (_SC_PAGESIZE);
    json_int_t mem_mb =
      pages > 0 && psz > 0 ? (json_int_t)pages * psz / (1024 * 1024) : 0;
    json_t *gpus = json_array ();
    /* GPUs by their device nodes: cheap, and needs no NVML. */
    DIR *d = opendir ("/dev");
    if (d && gpus) {
        struct dirent *e;
        while ((e = readdir (d))) {
            const char *n = e->d_name;
            if (strncmp (n, "nvidia", 6) == 0 && n[6] >= '0' && n[6] <= '9')
                json_array_append_new (gpus, json_string (n));
        }
    }
    if (d)
        closedir (d);
    const char *sv = getenv ("SLURM_VERSION");
    bool have_gpus = json_array_size (gpus) > 0;
    json_t *hi =
      json_pack ("{s:s, s:I, s:I, s:o, s:s}", "cpu_model", model, "cores",
                 (json_int_t)sysconf (_SC_NPROCESSORS_ONLN), "mem_mb", mem_mb, "gpus",
                 gpus ? gpus : json_array (), "slurm_version", sv ? sv : "");
    if (hi)
        host_versions (hi, have_gpus);
    return hi;
}
