#!/usr/bin/env bash
# Runs govulncheck (pinned, built through the Go module proxy) on every package of every module
# (the main module and the test modules, test/browser and test/ven) and fails on
# the known vulnerabilities the code reaches (govulncheck's exit status 3). Vulnerable modules
# that are required but never called are listed and do not fail.
#
# govulncheck reads the Go vulnerability database from $GOVULNDB (default https://vuln.go.dev;
# a mirror, or file:///path of a copy, works too). When an http(s) database cannot be reached,
# the check is skipped with a warning, unless VULNCHECK_REQUIRED=1, which fails instead: the
# module proxy reaches everywhere we run, vuln.go.dev does not.
#
# Usage: hack/vulncheck.sh     Env: GOVULNCHECK_VERSION, GOVULNDB, VULNCHECK_REQUIRED
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GOVULNCHECK_VERSION="${GOVULNCHECK_VERSION:-v1.9.0}"
db="${GOVULNDB:-https://vuln.go.dev}"
export GOWORK=off GOTOOLCHAIN=local

# Probe an http(s) database first (without curl, govulncheck's own error tells).
case "$db" in
  http://* | https://*)
    if command -v curl >/dev/null && ! reason="$(curl -fsS --max-time 15 -o /dev/null "$db/index/db.json" 2>&1)"; then
      if [[ "${VULNCHECK_REQUIRED:-}" == 1 ]]; then
        echo "vulncheck: ERROR: the vulnerability database $db is unreachable: $reason" >&2
        exit 1
      fi
      echo "vulncheck: WARNING: SKIPPED, the vulnerability database $db is unreachable ($reason)." >&2
      echo "vulncheck: set GOVULNDB to a reachable mirror or a file:// copy; VULNCHECK_REQUIRED=1 makes this fatal." >&2
      exit 0
    fi
    ;;
esac

echo "vulncheck: govulncheck $GOVULNCHECK_VERSION, database $db" >&2
go run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "$db" ./...
for m in test/browser test/ven; do
  echo "vulncheck: the test module ($m)" >&2
  go -C "$m" run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "$db" ./...
done
