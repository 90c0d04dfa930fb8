#!/usr/bin/env bash
# Installs helm (pinned) from what this project's machines reach, and prints its path.
#
# In order:
#   1. a helm already built for this version (per-user cache, so fresh clones do not rebuild);
#   2. `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` through the Go module proxy
#      (helm's release downloads, get.helm.sh, are not reachable from CI);
#   3. the same built as a dependency of a throwaway module (what works when `go install`
#      refuses a module whose go.mod has replace directives);
#   4. Debian's helm package, if apt has one and we may install it.
# The result is linked as bin/helm; its path is the only thing printed on stdout.
#
# Usage: hack/ensure-helm.sh         Env: HELM_VERSION (default below), FLEXSITE_CACHE_DIR
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${FLEXSITE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flexsite}"
cache="$cache_root/helm/$HELM_VERSION"
out="$root/bin/helm"

log() { echo "ensure-helm: $*" >&2; }

link_out() {
  mkdir -p "$root/bin"
  ln -sfn "$1" "$out"
  echo "$out"
}

if [[ -x "$cache/helm" ]]; then link_out "$cache/helm"; exit 0; fi

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
# What helm's own Makefile stamps in: its version, and the Kubernetes version that `helm
# template` and `helm lint` assume (client-go v0.X.Y -> Kubernetes 1.X), which would otherwise
# be the source's placeholder 1.20 and make lint misjudge API deprecations.
ldflags() {
  local client_go="$1" minor
  minor="$(echo "$client_go" | sed -E 's/^v0\.([0-9]+)\..*/\1/')"
  local f="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    f+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  echo "$f"
}

build_with_go() {
  command -v go >/dev/null || { log "go is not on PATH"; return 1; }
  local gomod client_go
  gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')" ||
    { log "helm.sh/helm/v3@$HELM_VERSION is not on the Go module proxy ($(go env GOPROXY))"; return 1; }
  client_go="$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod")"
  rm -rf "$cache.tmp"; mkdir -p "$cache.tmp"
  log "building helm $HELM_VERSION with go install (cold: a few minutes)"
  if GOBIN="$cache.tmp" go install -trimpath -ldflags "$(ldflags "$client_go")" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2; then
    return 0
  fi
  log "go install failed; building helm as a dependency of a throwaway module"
  local work; work="$(mktemp -d)"
  (
    cd "$work"
    printf 'module flexsite.local/helmbuild\n\ngo 1.26\n\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' > tools.go
    GOFLAGS=-mod=mod go mod tidy >&2
    GOFLAGS=-mod=mod go build -trimpath -ldflags "$(ldflags "$client_go")" -o "$cache.tmp/helm" helm.sh/helm/v3/cmd/helm >&2
  )
  local rc=$?
  rm -rf "$work"
  return $rc
}

if build_with_go && [[ -x "$cache.tmp/helm" ]]; then
  rm -rf "$cache"; mv "$cache.tmp" "$cache"
  log "built $("$cache/helm" version --short) into $cache"
  link_out "$cache/helm"
  exit 0
fi
rm -rf "$cache.tmp"

# Last resort: a distribution package (its version is whatever Debian ships, not the pin).
if command -v apt-cache >/dev/null && [[ -n "$(apt-cache policy helm 2>/dev/null | awk '/Candidate:/ && $2 != "(none)"')" ]]; then
  if [[ $(id -u) -eq 0 ]]; then
    log "installing Debian's helm package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q helm >&2 && link_out "$(command -v helm)" && exit 0
  else
    log "Debian has a helm package: install it with 'sudo apt-get install helm'"
  fi
fi
log "ERROR: could not install helm $HELM_VERSION"
exit 1
