#!/usr/bin/env bash
# Copies a Docker image into the e2e cluster's containerd (namespace k8s.io), where pods use it with
# imagePullPolicy: Never. Nothing is pulled: the image comes from the local Docker engine.
#
# Usage: hack/cluster/import-image.sh IMAGE[:TAG]...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($#)) || die "usage: $0 IMAGE[:TAG]..."
[[ -n $(pid_of containerd) ]] || die "the cluster's containerd is not running: run 'make cluster-up' first"
for img in "$@"; do
  docker image inspect "$img" >/dev/null 2>&1 || die "no Docker image $img: build it first (make docker-build IMG=$img)"
  log "importing $img into the cluster"
  docker save "$img" | ctr_k8s images import - >/dev/null
  # ctr stores a short name under its normalized full reference, the same one the kubelet resolves a
  # pod's image to, so pods refer to it as plain NAME:TAG.
  grep -qE "(^|/)${img//./\\.}\$" <<<"$(ctr_k8s images ls -q)" || die "$img is not in the cluster's containerd after the import"
done
