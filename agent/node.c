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
    if (bind (fd, (struct sockaddr *)&sin, sizeof (sin)) < 0
        || getsockname (fd, (struct sockaddr *)&sin, &sl) < 0) {
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

int node_detect (struct node_info *ni, const char *opt_name, int opt_order, dt_error_t *err)
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

json_t *node_hostinfo (void)
{
    char model[256];
    cpu_model (model, sizeof (model));
    long pages = sysconf (_SC_PHYS_PAGES), psz = sysconf (_SC_PAGESIZE);
    json_int_t mem_mb = pages > 0 && psz > 0 ? (json_int_t)pages * psz / (1024 * 1024) : 0;
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
    return json_pack ("{s:s, s:I, s:I, s:o, s:s}", "cpu_model", model,
                      "cores", (json_int_t)sysconf (_SC_NPROCESSORS_ONLN),
                      "mem_mb", mem_mb, "gpus", gpus ? gpus : json_array (),
                      "slurm_version", sv ? sv : "");
}
