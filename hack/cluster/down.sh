#!/usr/bin/env bash
# Stops the single-node e2e cluster hack/cluster/up.sh started and removes what it created: every process
# by its PID (never by name), the containers' shims, mounts under CLUSTER_DIR, the bridge, the KUBE-* and
# CNI-* iptables chains, the kubepods cgroups, the hard-coded host paths it created, and CLUSTER_DIR. It
# restores the host sysctls the kubelet rewrote. Docker and its containerd are left running, untouched.
#
# Usage: hack/cluster/down.sh (as root). Idempotent: safe to run when nothing is running.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $EUID -eq 0 ]] || die "run as root"

# stop NAME: SIGTERM to the PID up.sh recorded, SIGKILL after 15 s.
stop() {
  local name=$1 pid i
  pid=$(pid_of "$name")
  rm -f "$RUN/$name.pid" "$RUN/$name.exe"
  [[ -n $pid ]] || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 150; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  log "$name did not stop in 15s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null
  sleep 0.2
}

# alive PID: the process exists and is not a zombie.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

[[ -d $CLUSTER_DIR ]] || { log "nothing to do: $CLUSTER_DIR does not exist"; exit 0; }

# The node agents first, so nothing restarts the pods we are about to stop.
stop kube-proxy
stop kubelet

# Containers: through the cluster's containerd first, so each shim exits cleanly and removes its socket
# from /run/containerd/s (a directory every containerd on the host shares).
if [[ -n $(pid_of containerd) ]]; then
  for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1
  done
  sleep 0.5
  for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks delete -f "$id" >/dev/null 2>&1
  done
  for id in $(ctr_k8s containers ls -q 2>/dev/null); do
    ctr_k8s containers delete "$id" >/dev/null 2>&1
  done
fi
# Whatever is left, by the PIDs in containerd's state directory: containers first (SIGKILL: this is a
# throwaway cluster), then the shims.
tasks=$CLUSTER_DIR/containerd/state/io.containerd.runtime.v2.task
if [[ -d $tasks ]]; then
  for f in "$tasks"/*/*/init.pid; do
    [[ -f $f ]] && kill -KILL "$(<"$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$tasks"/*/*/shim.pid; do
    [[ -f $f ]] && kill -TERM "$(<"$f")" 2>/dev/null
  done
  sleep 1
  for f in "$tasks"/*/*/shim.pid; do
    [[ -f $f ]] && kill -KILL "$(<"$f")" 2>/dev/null
  done
fi
stop containerd
stop cluster-dns
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

# Mounts under the cluster's directory (container root filesystems, network namespaces, pod volumes),
# deepest first.
for i in 1 2 3; do
  mapfile -t mounts < <(awk -v d="$CLUSTER_DIR/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
  ((${#mounts[@]})) || break
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# The bridge (and any veth still attached to it).
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  log "removing bridge $BRIDGE"
  for v in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$v" 2>/dev/null
  done
  ip link del "$BRIDGE"
fi

# iptables: the rules in the built-in chains that jump to KUBE-* or CNI-* chains, then those chains.
for ipt in iptables ip6tables; do
  command -v "$ipt" >/dev/null || continue
  for table in filter nat mangle raw; do
    rules=$("$ipt" -t "$table" -S 2>/dev/null) || continue
    while read -r rule; do
      # shellcheck disable=SC2086 # the rule is word-split back into its arguments on purpose
      eval "$ipt -t $table -D ${rule#-A }" 2>/dev/null
    done < <(grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE-|CNI-)' <<<"$rules")
    chains=$(grep -oE '^-N (KUBE-|CNI-)[^ ]+' <<<"$rules" | cut -d' ' -f2)
    for c in $chains; do "$ipt" -t "$table" -F "$c" 2>/dev/null; done
    for c in $chains; do "$ipt" -t "$table" -X "$c" 2>/dev/null; done
  done
done

# The kubelet's cgroups (cgroup v1, cgroupfs driver): kubepods under every hierarchy, deepest first.
for h in /sys/fs/cgroup/*/; do
  [[ -d ${h}kubepods ]] || continue
  find "${h}kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
done

# Host sysctls the kubelet rewrote.
if [[ -f $CLUSTER_DIR/sysctls.saved ]]; then
  while IFS='=' read -r k v; do
    [[ -n $k ]] || continue
    [[ $(sysctl -n "$k" 2>/dev/null) == "$v" ]] || sysctl -q -w "$k=$v" 2>/dev/null || log "could not restore $k=$v"
  done <"$CLUSTER_DIR/sysctls.saved"
fi

# Hard-coded host paths the cluster created (listed by up.sh before its first start), longest first.
if [[ -f $CLUSTER_DIR/created-paths ]]; then
  while read -r p; do
    [[ -n $p && $p == /* ]] || continue
    awk -v d="$p" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r umount -l 2>/dev/null
    rm -rf -- "$p"
  done < <(sort -r "$CLUSTER_DIR/created-paths")
fi

rm -rf -- "$CLUSTER_DIR"
rm -f -- "$ADMIN_KUBECONFIG"
log "cluster down"
