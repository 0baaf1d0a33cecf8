/* ui.h: the read-only web page under /ui/ (static files from UiDir, the
 * charting library from UiChartJs) and its link route POST /v1/ui/link. */
#ifndef DT_UI_H
#define DT_UI_H

#include <stdbool.h>
#include "common/errprintf.h"

struct ctld;

/* Register /ui, /ui/{file}, /ui/lib/{file}, POST /v1/ui/link and GET
 * /v1/ui/whoami on ctx->httpd; make the link-signing key. */
int ui_register_routes (struct ctld *ctx, dt_error_t *err);

/* Whether 'path' is a static file of the page (no credential needed:
 * the files hold no data; the data comes through the API). */
bool ui_is_static_path (const char *path);

#endif
