#!/usr/bin/env bash
# Builds the control-plane binaries the tests and `make run` need (etcd, kube-apiserver,
# kubectl) from source through the Go module proxy, and prints the directory that holds them.
#
# Why from source: setup-envtest downloads prebuilt archives from hosts this project's CI
# cannot reach; the Go module proxy is reachable everywhere we run.
#
# The binaries are kept in a per-user cache (so a fresh clone on the same machine does not
# rebuild: a cold build takes ~6 minutes on 2 cores) and linked into bin/k8s/<version>/.
#
# Usage: hack/ensure-k8s-binaries.sh        -> prints the assets directory on stdout
# Env:   K8S_VERSION (default 1.37.1), ETCD_VERSION (default 3.7.3), FLEXSITE_CACHE_DIR
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${FLEXSITE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flexsite}"
cache="$cache_root/k8s/${K8S_VERSION}-etcd${ETCD_VERSION}"
out="$root/bin/k8s/${K8S_VERSION}"

log() { echo "ensure-k8s-binaries: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

have_all() { [[ -x "$1/etcd" && -x "$1/kube-apiserver" && -x "$1/kubectl" ]]; }

link_out() {
  mkdir -p "$out"
  for b in etcd kube-apiserver kubectl; do ln -sf "$cache/$b" "$out/$b"; done
  echo "$out"
}

if have_all "$cache"; then link_out; exit 0; fi

# Two callers at once (a suite and make run, or parallel worktrees) would build into the same
# .tmp directory and one would find the other's half-built output: build under a lock, and
# look again once we hold it.
mkdir -p "$(dirname "$cache")"
if command -v flock >/dev/null; then
  exec 9>"$cache.lock"
  flock 9
  if have_all "$cache"; then link_out; exit 0; fi
fi

command -v go >/dev/null || die "go is not on PATH"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

# Probe before building: the proxy's version list can name versions it then refuses.
probe() {
  go mod download -json "$1@$2" >/dev/null 2>&1 ||
    die "module $1@$2 cannot be downloaded from the Go module proxy ($(go env GOPROXY)); set K8S_VERSION/ETCD_VERSION to a version it serves"
}
probe k8s.io/kubernetes "v${K8S_VERSION}"
probe go.etcd.io/etcd/server/v3 "v${ETCD_VERSION}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$cache.tmp"; mkdir -p "$cache.tmp"

# kube-apiserver and kubectl: a throwaway module that requires k8s.io/kubernetes and replaces
# each of its ./staging/ modules with the published k8s.io/<name> v0.<minor>.<patch>.
log "building kube-apiserver and kubectl v${K8S_VERSION} (cold: several minutes)"
k8s_gomod="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
staging_version="v0.${K8S_VERSION#*.}"
mkdir -p "$work/k8s"
(
  cd "$work/k8s"
  {
    echo "module flexsite.local/k8sbuild"
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$k8s_gomod" |
      awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
  } > go.mod
  cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy >/dev/null 2>&1 || go get "k8s.io/kubernetes@v${K8S_VERSION}" >&2
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION} -X ${pkg}.gitMajor=${K8S_VERSION%%.*}"
    minor="${K8S_VERSION#*.}"; ldflags+=" -X ${pkg}.gitMinor=${minor%%.*} -X ${pkg}.gitTreeState=clean"
  done
  go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
  go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/kubectl" k8s.io/kubernetes/cmd/kubectl >&2
) || die "building kube-apiserver/kubectl v${K8S_VERSION} failed (see above)"

# etcd: package main sits at the root of go.etcd.io/etcd/server/v3; `go install` refuses it
# because its go.mod has replace directives, so it is built as a dependency instead.
log "building etcd v${ETCD_VERSION}"
mkdir -p "$work/etcd"
(
  cd "$work/etcd"
  printf 'module flexsite.local/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy >/dev/null 2>&1 || true
  go build -trimpath -ldflags "-s -w" -o "$cache.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
) || die "building etcd v${ETCD_VERSION} failed (see above)"

have_all "$cache.tmp" || die "build finished but binaries are missing in $cache.tmp"
rm -rf "$cache"; mv "$cache.tmp" "$cache"
log "built into $cache"
link_out
