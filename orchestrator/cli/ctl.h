/* ctl.h: dtctl's connection to dtctld: controller URL, MUNGE auth,
 * requests, and the mapping of answers to documented exit codes.
 *
 * The CLI dies on the first error: ctl_call prints one
 * line on stderr and exits with the code below, so commands only handle
 * the success path.
 */
#ifndef DTCTL_CTL_H
#define DTCTL_CTL_H

#include <stdbool.h>
#include <jansson.h>

/* Exit codes, documented in dtctl(1) EXIT STATUS. */
enum ctl_exit {
    CTL_EXIT_OK = 0,
    CTL_EXIT_USAGE = 1,       /* bad usage or bad input (HTTP 400, 413) */
    CTL_EXIT_UNREACHABLE = 2, /* the controller could not be reached */
    CTL_EXIT_NOTFOUND = 3,    /* no such job or node (HTTP 404) */
    CTL_EXIT_DENIED = 4,      /* authentication or permission (HTTP 401, 403) */
    CTL_EXIT_CONFLICT = 5,    /* illegal in the current state (HTTP 409, 410) */
    CTL_EXIT_SERVER = 6,      /* controller error or malformed answer (5xx) */
};

#define CTL_DEFAULT_URL "http://127.0.0.1:6830"

struct ctl {
    const char *controller_flag; /* --controller, borrowed from argv */
    char *url;                   /* controller base URL, owned; resolved at first call */
    const char *url_from;        /* where the URL came from, for error messages */
    bool json;                   /* --json: print data as JSON */
};

/* Resolve the controller URL (done by the first ctl_call): --controller,
 * else $DTCTL_CONTROLLER, else ControllerURL in the config file
 * ($DTCTL_CONF, or SYSCONFDIR/dtctl/dtctl.conf when it exists), else
 * CTL_DEFAULT_URL.  Exits 1 on a bad config file or URL. */
void ctl_resolve (struct ctl *ctl);
void ctl_fini (struct ctl *ctl);

/* Send one request with a fresh MUNGE credential.  Returns the envelope's
 * "data" (new reference; JSON null if absent) on a 2xx answer; otherwise
 * prints the controller's error text and exits with the mapped code.
 * Warnings in the envelope are printed on stderr. */
json_t *ctl_call (struct ctl *ctl, const char *method, const char *path,
                  const json_t *body);

/* Like ctl_call, but a 404 answer returns NULL instead of exiting (used
 * where a part is optional, e.g. a report on an older controller). */
json_t *ctl_call_optional (struct ctl *ctl, const char *method, const char *path,
                           const json_t *body);

/* Append 'seg' to 'buf' percent-encoded as one URL path segment.  Returns
 * buf.  A job id or node name given by the user never changes the route. */
char *ctl_path (char *buf, size_t len, const char *fmt_prefix, const char *seg,
                const char *suffix);

/* Print "dtctl: msg" on stderr and exit with 'code'. */
void ctl_die (int code, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3), noreturn));

#endif
