/* version.c: the version string of every program, from configure. */
#include <config.h>

#include "common/version.h"

const char *dt_version_string (void)
{
    return PACKAGE_NAME " " PACKAGE_VERSION " (git " DT_GIT_REV ")";
}
