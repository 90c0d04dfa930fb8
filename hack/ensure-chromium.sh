#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the browser tests (test/browser) and
# prints its path.
#
# In order:
#   1. $FLEXSITE_CHROMIUM, when it names an executable;
#   2. Debian's `chromium` already installed (/usr/bin/chromium) or any chromium on PATH;
#   3. `apt-get install chromium` when running as root with apt-get available.
# Otherwise it prints exactly what is missing and how to install it, and exits 1.
#
# Usage: hack/ensure-chromium.sh   -> prints the browser's path on stdout
set -euo pipefail

log() { echo "ensure-chromium: $*" >&2; }

found() {
  local c
  for c in "${FLEXSITE_CHROMIUM:-}" /usr/bin/chromium "$(command -v chromium 2>/dev/null || true)" \
           "$(command -v chromium-browser 2>/dev/null || true)"; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  return 1
}

if path="$(found)"; then echo "$path"; exit 0; fi

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  log "installing Debian's chromium with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
  if path="$(found)"; then echo "$path"; exit 0; fi
fi

log "MISSING: the browser tests (test/browser) need Chromium: no executable at \$FLEXSITE_CHROMIUM," \
    "/usr/bin/chromium or chromium on PATH."
if [[ "$(id -u)" != 0 ]]; then
  log "install it as root:  apt-get install chromium   (Debian/Ubuntu), or set FLEXSITE_CHROMIUM=/path/to/chromium"
else
  log "apt-get is not available here: install Chromium with this system's package manager," \
      "or set FLEXSITE_CHROMIUM=/path/to/chromium"
fi
exit 1
