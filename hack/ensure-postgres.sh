#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are installed, for `make run`
# (the embedded database) and the tests that need a real PostgreSQL, and prints their directory.
#
# In order:
#   1. $FLEXSITE_POSTGRES_BIN, when it holds initdb, pg_ctl and postgres;
#   2. Debian's server package already installed: the newest /usr/lib/postgresql/<version>/bin;
#   3. `apt-get install postgresql` when running as root with apt-get available.
# Otherwise it prints exactly what is missing and how to install it, and exits 1.
#
# PostgreSQL refuses to run as root: internal/db/embeddedpg runs it as the `postgres` system user
# (which Debian's package creates), or `nobody`, when the caller is root.
#
# Usage: hack/ensure-postgres.sh   -> prints the binaries' directory on stdout
set -euo pipefail

log() { echo "ensure-postgres: $*" >&2; }

complete() { [[ -n "$1" && -x "$1/initdb" && -x "$1/pg_ctl" && -x "$1/postgres" ]]; }

found() {
  local d
  if complete "${FLEXSITE_POSTGRES_BIN:-}"; then echo "$FLEXSITE_POSTGRES_BIN"; return 0; fi
  # Newest version first.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4 -rn); do
    if complete "$d"; then echo "$d"; return 0; fi
  done
  return 1
}

if dir="$(found)"; then echo "$dir"; exit 0; fi

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  log "installing Debian's postgresql with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
  if dir="$(found)"; then echo "$dir"; exit 0; fi
fi

log "MISSING: the embedded database (make run) and the database tests need PostgreSQL's server" \
    "binaries initdb, pg_ctl and postgres: none in \$FLEXSITE_POSTGRES_BIN or /usr/lib/postgresql/*/bin."
if [[ "$(id -u)" != 0 ]]; then
  log "install them as root:  apt-get install postgresql   (Debian/Ubuntu), or set FLEXSITE_POSTGRES_BIN=/path/to/postgresql/bin"
else
  log "apt-get is not available here: install PostgreSQL's server with this system's package manager," \
      "or set FLEXSITE_POSTGRES_BIN=/path/to/postgresql/bin"
fi
exit 1
