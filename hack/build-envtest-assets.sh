#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs — kube-apiserver, etcd and kubectl — from the Go module
# proxy into bin/k8s/<version>/, so tests run on a machine with no cluster and no other download source.
#
# Usage: hack/build-envtest-assets.sh [K8S_VERSION]   (default: the k8s.io/kubernetes version pinned in
# hack/tools/go.mod). Idempotent: binaries already present for that version are not rebuilt.
# Prints the asset directory (suitable for KUBEBUILDER_ASSETS) on its last line.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"
k8s_version=${1:-$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$tools/go.mod")}
if [[ -z "$k8s_version" ]]; then
  echo "build-envtest-assets: cannot read the k8s.io/kubernetes version from $tools/go.mod" >&2
  exit 1
fi
out="$root/bin/k8s/$k8s_version"
mkdir -p "$out"

minor=${k8s_version#v}; major=${minor%%.*}; minor=${minor#*.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

log() { printf 'build-envtest-assets: %s\n' "$*" >&2; }

build() {
  local name=$1
  if [[ -x "$out/$name" ]]; then
    log "$name $k8s_version already built in ${out#"$root"/}"
    return
  fi
  log "building $name for $k8s_version (a cold build takes several minutes on 2 cores)..."
  local start=$SECONDS
  if ! (cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "./$name"); then
    rm -f "$out/$name.tmp"
    log "building $name failed. Check that the Go module proxy is reachable (go env GOPROXY) and that"
    log "hack/tools/go.mod and go.sum are intact (cd hack/tools && go mod verify), then run 'make envtest-assets' again."
    exit 1
  fi
  mv "$out/$name.tmp" "$out/$name"
  log "built $name in $((SECONDS - start))s"
}

build etcd
build kube-apiserver
build kubectl
echo "$out"
