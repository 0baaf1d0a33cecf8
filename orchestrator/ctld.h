/* ctld.h: the top-level context of dtctld: one pointer per subsystem.
 *
 * main.c creates the subsystems in dependency order and destroys them in
 * reverse; each subsystem borrows the context to reach the others.
 */
#ifndef DT_CTLD_H
#define DT_CTLD_H

#include <stdbool.h>
#include <stdint.h>
#include "common/conf.h"
#include "common/httpd.h"
#include "orchestrator/ctldconf.h"
#include "orchestrator/store.h"
#include "orchestrator/launcher.h"

struct jobs;
struct metrics;
struct report;

struct ctld {
    struct ctld_config *cfg; /* current config (replaced on reload) */
    store_t *store;
    dt_httpd_t *httpd;
    const struct launcher_ops *lops;
    void *launcher; /* lops' context */
    struct jobs *jobs;
    struct metrics *metrics;
    struct report *report; /* goodput accounting (report.c) */
    char url[256];         /* the URL agents are given */
    bool stop;             /* leave the event loop */
    /* SIGHUP reloads since start: [0] taken, [1] refused (the old
     * configuration kept); /metrics shows them */
    uint64_t reloads[2];
};

#endif
