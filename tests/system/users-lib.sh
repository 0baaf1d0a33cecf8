# users-lib.sh: the two ordinary users the system tests submit jobs as.
#
# A shared cluster's users are not root: the tests run jobs as two
# ordinary accounts, so that one user's attempts against the other (and
# against root) can be checked.  Source it from a tNNNN-*.t script that
# runs as root; it creates the accounts once per machine (idempotent, and
# safe when several tests start at once).
#
#   DT_USER_A, DT_USER_B    the two user names (dtalice, dtbob)
#   dt_users_setup          create them if missing (skips the test, 77,
#                           where accounts cannot be created)
#   as_user USER CMD...     run CMD as USER with a clean, minimal
#                           environment (HOME, PATH, LANG kept sane)
#   user_uid USER           print USER's uid

DT_USER_A=dtalice
DT_USER_B=dtbob

dt_users_setup () {
    local u
    [ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP not root: cannot create test users"; exit 77; }
    for u in "$DT_USER_A" "$DT_USER_B"; do
        id -u "$u" >/dev/null 2>&1 && continue
        # useradd takes /etc/passwd's lock itself; a concurrent test that
        # created the user first makes it fail with "already exists".
        useradd --create-home --shell /bin/sh "$u" 2>/dev/null || id -u "$u" >/dev/null 2>&1 \
            || { echo "1..0 # SKIP cannot create user $u"; exit 77; }
    done
}

as_user () {
    local u=$1; shift
    runuser -u "$u" -- env -i HOME="$(getent passwd "$u" | cut -d: -f6)" USER="$u" \
        LOGNAME="$u" PATH="${AS_USER_PATH:-$PATH}" LANG=C.UTF-8 ${SLURM_CONF:+SLURM_CONF=$SLURM_CONF} "$@"
}

user_uid () { id -u "$1"; }
