#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are installed, for `make run`
# (the embedded database) and the tests that need a real PostgreSQL, and prints their directory.
#
# In order:
#   1. $FLEXSITE_POSTGRES_BIN, when it holds initdb, pg_ctl and postgres;
#   2. Debian's server package already installed: the newest /usr/lib/postgresql/<version>/bin;
#   3. `apt-get install postgresql` when running as root with apt-get available.
# Otherwise it prints exactly what is missing and how to install it, and exits 1.
# The server found must have the pg_trgm extension (PostgreSQL's contrib modules; the meter
# register needs it): where its share directory shows it missing, the script installs
# postgresql-contrib as root with apt-get, or says what to install, and exits 1.
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

# trgm_control is where the server of binaries $1 keeps pg_trgm's control file (the meter
# register's address ranking needs the extension: migration 00021), or nothing when it cannot
# tell: the share directory pg_config names, else Debian's /usr/share/postgresql/<version>.
trgm_control() {
  local dir="$1" share="" version
  if [[ -x "$dir/pg_config" ]]; then share="$("$dir/pg_config" --sharedir 2>/dev/null || true)"; fi
  if [[ -z "$share" && "$dir" == /usr/lib/postgresql/*/bin ]]; then
    version="${dir#/usr/lib/postgresql/}"; version="${version%/bin}"
    share="/usr/share/postgresql/$version"
  fi
  if [[ -n "$share" && -d "$share/extension" ]]; then echo "$share/extension/pg_trgm.control"; fi
}

# has_trgm fails only when it can tell that the server of binaries $1 lacks pg_trgm (where it
# cannot tell, the manager's start and the test database say exactly what is missing).
has_trgm() {
  local control; control="$(trgm_control "$1")"
  [[ -z "$control" || -f "$control" ]]
}

# ready prints the binaries' directory when they have pg_trgm; otherwise it installs the
# contrib package as root with apt-get, or says exactly what to install, and fails.
ready() {
  local dir="$1"
  if has_trgm "$dir"; then echo "$dir"; return 0; fi
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian's postgresql-contrib (the pg_trgm extension) with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql-contrib >&2 || true
    if has_trgm "$dir"; then echo "$dir"; return 0; fi
  fi
  log "MISSING: the PostgreSQL of $dir lacks the pg_trgm extension ($(trgm_control "$dir") is not there), which" \
      "Flexsite's schema needs (the meter register). Install PostgreSQL's contrib modules as root:" \
      "apt-get install postgresql-contrib   (Debian/Ubuntu; the postgresql-<version> package includes them)," \
      "or your system's contrib package (e.g. postgresql<version>-contrib), or set FLEXSITE_POSTGRES_BIN to a PostgreSQL that has it"
  return 1
}

if dir="$(found)"; then ready "$dir"; exit $?; fi

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  log "installing Debian's postgresql with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql postgresql-contrib >&2
  if dir="$(found)"; then ready "$dir"; exit $?; fi
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
