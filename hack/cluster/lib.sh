# Shared settings of the single-node e2e cluster (sourced by up.sh, down.sh, import-image.sh).
# Everything the cluster writes lives under CLUSTER_DIR, so down.sh can remove it exactly; the admin
# kubeconfig is also copied to bin/cluster/admin.kubeconfig in the repository.
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K8S_VERSION=${K8S_VERSION:-$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$root/hack/tools/go.mod")}
K8S_BIN=${K8S_BIN:-$root/bin/k8s/$K8S_VERSION}
CLUSTER_DIR=${CLUSTER_DIR:-/var/lib/agentrewind-cluster}
ADMIN_KUBECONFIG=${ADMIN_KUBECONFIG:-$root/bin/cluster/admin.kubeconfig}

NODE_NAME=agentrewind-node
BRIDGE=arwbr0
BRIDGE_IP=10.88.0.1          # the node's address: API server, kubelet, CNI gateway
POD_CIDR=10.88.0.0/16        # pods live on the bridge's subnet
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
APISERVER_PORT=6443
ETCD_CLIENT_PORT=23790       # loopback only; off the default so a developer's etcd is not disturbed
ETCD_PEER_PORT=23800
CNI_NETWORK=agentrewind
PAUSE_IMAGE=agentrewind.local/pause:3.10

CONTAINERD_SOCK=$CLUSTER_DIR/containerd/containerd.sock
PKI=$CLUSTER_DIR/pki
RUN=$CLUSTER_DIR/run   # pid files
LOGS=$CLUSTER_DIR/logs

# Host paths the kubelet, containerd and the CNI plugins hard-code. up.sh records which of them it
# created (in $CLUSTER_DIR/created-paths) so down.sh removes those and nothing else.
HOST_PATHS=(/run/containerd/fifo /run/containerd/s /run/containerd /var/lib/cni /var/lib/kubelet /var/log/containers /var/log/pods)
# Host sysctls the kubelet rewrites (protectKernelDefaults is off); saved before its first start.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

CLUSTER_DOMAIN=cluster.local
DNS_PORT=53                  # cluster-dns listens on $BRIDGE_IP:$DNS_PORT, the kubelet's clusterDNS

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler cluster-dns containerd kubelet kube-proxy)

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# pid_of NAME prints the PID of a running component started by up.sh, or nothing.
pid_of() {
  local f=$RUN/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  # The PID must still be the process we started: same executable path.
  if [[ -n $pid && -d /proc/$pid ]] && [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(<"$RUN/$1.exe")" ]]; then
    echo "$pid"
  fi
}

kubectl_admin() { "$K8S_BIN/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig/admin.kubeconfig" "$@"; }
ctr_k8s() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
