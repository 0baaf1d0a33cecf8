/* version.h: the version string every program prints. */
#ifndef DT_VERSION_H
#define DT_VERSION_H

/* "dtctl 0.1.0 (git abc1234)" - static storage. */
const char *dt_version_string (void);

#endif
