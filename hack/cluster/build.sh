#!/usr/bin/env bash
# Builds the node and control-plane binaries the single-node e2e cluster needs beyond envtest's —
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy — from the Go module proxy (the tools
# module in hack/tools) into bin/k8s/<version>/, beside kube-apiserver, etcd and kubectl
# (hack/build-envtest-assets.sh builds those). Also builds the pause binary for the sandbox image and
# cluster-dns, the cluster's DNS (Services only, nothing forwarded), both into bin/cluster-tools/.
#
# Usage: hack/cluster/build.sh [K8S_VERSION]. Idempotent: binaries already present are not rebuilt.
# Kubernetes is pinned to 1.37: 1.38 needs a newer containerd (the CRI RuntimeConfig call) and cgroup v2,
# which Debian 12 and this machine do not have.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools="$root/hack/tools"
k8s_version=${1:-$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$tools/go.mod")}
[[ -n "$k8s_version" ]] || { echo "cluster/build: cannot read the k8s.io/kubernetes version from $tools/go.mod" >&2; exit 1; }
out="$root/bin/k8s/$k8s_version"
mkdir -p "$out"

minor=${k8s_version#v}; major=${minor%%.*}; minor=${minor#*.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

log() { printf 'cluster/build: %s\n' "$*" >&2; }

build() {
  local name=$1
  if [[ -x "$out/$name" ]]; then
    log "$name $k8s_version already built in ${out#"$root"/}"
    return
  fi
  log "building $name $k8s_version (cold: kubelet ~15 min, controller-manager ~8 min on 2 cores; warm: ~1 min)..."
  local start=$SECONDS
  if ! (cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "./$name"); then
    rm -f "$out/$name.tmp"
    log "building $name failed. Check that the Go module proxy is reachable (go env GOPROXY) and that"
    log "hack/tools/go.mod and go.sum are intact (cd hack/tools && go mod verify), then run 'make cluster-binaries' again."
    exit 1
  fi
  mv "$out/$name.tmp" "$out/$name"
  log "built $name in $((SECONDS - start))s"
}

build kubelet
build kube-controller-manager
build kube-scheduler
build kube-proxy

# tool NAME: a small program of the tools module into bin/cluster-tools/ — pause, the sandbox image's
# only binary (it sleeps until SIGTERM/SIGINT), and cluster-dns (github.com/miekg/dns, pinned in
# hack/tools/go.mod, like everything the cluster runs).
tool() {
  local bin="$root/bin/cluster-tools/$1"
  [[ -x "$bin" ]] && return
  mkdir -p "$(dirname "$bin")"
  (cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bin.tmp" "./$1")
  mv "$bin.tmp" "$bin"
}
tool pause
tool cluster-dns
echo "$out"
