#!/usr/bin/env bash
# Starts a real single-node Kubernetes cluster for the end-to-end suite, offline: etcd, kube-apiserver
# (Node,RBAC; NodeRestriction), kube-controller-manager, kube-scheduler, a containerd of its own beside
# Docker's (own socket, root and state), the kubelet and kube-proxy, and a DNS server for Services
# (cluster-dns: <svc>.<ns>.svc.cluster.local, nothing forwarded), with every listener on 127.0.0.1 or
# on a bridge this script creates. Binaries come from `make cluster-binaries` (bin/k8s/<version>).
#
# Usage: hack/cluster/up.sh (as root). Idempotent: components already running are left alone and data
# under CLUSTER_DIR is reused. Writes the admin kubeconfig to bin/cluster/admin.kubeconfig.
# Stop and remove everything with hack/cluster/down.sh. See ../shared/CLUSTER.md for the why of each
# setting (cgroup v1, no CAP_SYS_RESOURCE, Docker's FORWARD policy).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $EUID -eq 0 ]] || die "run as root: the kubelet, containerd and the bridge need it"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  [[ -x $K8S_BIN/$b ]] || die "$K8S_BIN/$b is missing: run 'make cluster-binaries' first"
done
for b in pause cluster-dns; do
  [[ -x $root/bin/cluster-tools/$b ]] || die "bin/cluster-tools/$b is missing: run 'make cluster-binaries' first"
done
start_time=$SECONDS

# --- Host packages: the CNI plugins and conntrack (kube-proxy's cleanup uses it) ---------------------
missing=()
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/firewall ]] || missing+=(containernetworking-plugins)
command -v conntrack >/dev/null || missing+=(conntrack)
if ((${#missing[@]})); then
  log "installing ${missing[*]} with apt-get"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
for b in containerd containerd-shim-runc-v2 runc ctr iptables openssl ip; do
  command -v "$b" >/dev/null || die "$b is not installed"
done

# --- Directories, and the hard-coded host paths this cluster will create ------------------------------
first_start=false
if [[ ! -f $CLUSTER_DIR/created-paths ]]; then
  first_start=true
  mkdir -p "$CLUSTER_DIR"
  : >"$CLUSTER_DIR/created-paths.tmp"
  for p in "${HOST_PATHS[@]}"; do [[ -e $p ]] || echo "$p" >>"$CLUSTER_DIR/created-paths.tmp"; done
  mv "$CLUSTER_DIR/created-paths.tmp" "$CLUSTER_DIR/created-paths"
fi
mkdir -p "$PKI" "$RUN" "$LOGS" "$CLUSTER_DIR"/{etcd,kubeconfig,config,containerd,cni/net.d,cni/networks,kubelet,pod-logs,runc}
mkdir -p "$(dirname "$ADMIN_KUBECONFIG")"

# --- Certificates (ECDSA P-256, one CA) ---------------------------------------------------------------
ossl() { openssl "$@" 2>/dev/null; }
# cert NAME CN [O] [SANS] [serverAuth|clientAuth|both]
cert() {
  local name=$1 cn=$2 o=${3:-} sans=${4:-} usage=${5:-clientAuth}
  [[ -f $PKI/$name.crt ]] && return
  local subj="/CN=$cn"; [[ -n $o ]] && subj="/O=$o$subj"
  ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key"
  ossl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    case $usage in both) echo "extendedKeyUsage=serverAuth,clientAuth" ;; *) echo "extendedKeyUsage=$usage" ;; esac
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  ossl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 365 \
    -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt"
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
if [[ ! -f $PKI/ca.crt ]]; then
  log "creating certificates"
  ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key"
  ossl req -x509 -new -key "$PKI/ca.key" -subj "/CN=agentrewind-e2e-ca" -days 365 -sha256 -out "$PKI/ca.crt"
fi
if [[ ! -f $PKI/sa.key ]]; then
  ossl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key.tmp"
  ossl ec -in "$PKI/sa.key.tmp" -pubout -out "$PKI/sa.pub"
  mv "$PKI/sa.key.tmp" "$PKI/sa.key"
fi
cert apiserver kube-apiserver "" "IP:$BRIDGE_IP,IP:$KUBERNETES_SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost" serverAuth
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert admin kubernetes-admin system:masters
cert controller-manager system:kube-controller-manager
cert scheduler system:kube-scheduler
cert kubelet "system:node:$NODE_NAME" system:nodes
cert kubelet-serving "system:node:$NODE_NAME" system:nodes "IP:$BRIDGE_IP,DNS:$NODE_NAME" serverAuth
cert kube-proxy system:kube-proxy
cert cluster-dns agentrewind:cluster-dns
chmod 600 "$PKI"/*.key

# kubeconfig NAME CERT: a self-contained kubeconfig for the API server on the bridge.
kubeconfig() {
  local name=$1 c=$2 f=$CLUSTER_DIR/kubeconfig/$1.kubeconfig
  [[ -f $f ]] && return
  cat >"$f.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentrewind-e2e
  cluster:
    server: https://$BRIDGE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$c.crt")
    client-key-data: $(base64 -w0 <"$PKI/$c.key")
contexts:
- name: $name@agentrewind-e2e
  context: {cluster: agentrewind-e2e, user: $name}
current-context: $name@agentrewind-e2e
EOF
  chmod 600 "$f.tmp"; mv "$f.tmp" "$f"
}
for k in admin controller-manager scheduler kubelet kube-proxy cluster-dns; do kubeconfig "$k" "$k"; done

# --- The bridge: the node's address (the API server cannot advertise a loopback address) --------------
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  log "creating bridge $BRIDGE ($BRIDGE_IP)"
  ip link add "$BRIDGE" type bridge
fi
# Captured, not piped into grep -q: under pipefail, grep exiting at the first match can fail the pipeline
# (SIGPIPE to ip) and the address would be added twice.
[[ $(ip -4 addr show dev "$BRIDGE") == *"inet $BRIDGE_IP/"* ]] || ip addr add "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up

# --- Host sysctls the kubelet will rewrite: saved once, restored by down.sh ---------------------------
if [[ ! -f $CLUSTER_DIR/sysctls.saved ]]; then
  for s in "${KUBELET_SYSCTLS[@]}"; do
    v=$(sysctl -n "$s" 2>/dev/null) && echo "$s=$v"
  done >"$CLUSTER_DIR/sysctls.saved.tmp"
  mv "$CLUSTER_DIR/sysctls.saved.tmp" "$CLUSTER_DIR/sysctls.saved"
fi

# --- Processes ----------------------------------------------------------------------------------------
# start NAME BINARY ARGS...: runs BINARY in its own session, logging to $LOGS/NAME.log, unless running.
start() {
  local name=$1 bin=$2; shift 2
  if [[ -n $(pid_of "$name") ]]; then
    log "$name already running (pid $(pid_of "$name"))"
    return
  fi
  log "starting $name"
  readlink -f "$bin" >"$RUN/$name.exe"
  setsid "$bin" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  local pid=$! i
  echo "$pid" >"$RUN/$name.pid"
  # $! runs setsid until it has exec'd the binary, and until then pid_of (which checks the executable)
  # sees no $name: wait_for would take a component that is still starting for one that exited.
  for ((i = 0; i < 200; i++)); do
    [[ -d /proc/$pid ]] || return 0
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(<"$RUN/$name.exe")" ]] && return 0
    sleep 0.05
  done
}
# write_config FILE: writes stdin to FILE only when it differs, so that a second run leaves running
# components alone (kube-proxy exits when its configuration file is written, even with the same content).
write_config() {
  local f=$1
  cat >"$f.new"
  if cmp -s "$f.new" "$f"; then rm -f "$f.new"; else mv "$f.new" "$f"; fi
}
# wait_for NAME SECONDS CMD...: polls CMD until it succeeds; on timeout shows NAME's log and fails.
wait_for() {
  local name=$1 timeout=$2 deadline; shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [[ -z $(pid_of "$name") ]]; then
      tail -n 30 "$LOGS/$name.log" >&2 || true
      die "$name exited (log: $LOGS/$name.log)"
    fi
    if ((SECONDS > deadline)); then
      tail -n 30 "$LOGS/$name.log" >&2 || true
      die "$name not ready after ${timeout}s (log: $LOGS/$name.log)"
    fi
    sleep 0.5
  done
}
admin_get() { curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://$BRIDGE_IP:$APISERVER_PORT$1"; }

start etcd "$K8S_BIN/etcd" --name default --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn
wait_for etcd 60 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --advertise-address "$BRIDGE_IP" --bind-address "$BRIDGE_IP" --secure-port "$APISERVER_PORT" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" --service-cluster-ip-range "$SERVICE_CIDR" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --allow-privileged=true --profiling=false --v=1
wait_for kube-apiserver 120 admin_get /readyz

start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig "$CLUSTER_DIR/kubeconfig/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/kubeconfig/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/kubeconfig/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false --profiling=false --v=1
start kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig "$CLUSTER_DIR/kubeconfig/scheduler.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/kubeconfig/scheduler.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/kubeconfig/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1

# --- cluster-dns: Services by name for pods, on the bridge, under its own identity that may only read
# Services. Nothing else is answered and nothing is forwarded, so no pod's lookup leaves the machine.
kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "agentrewind:cluster-dns"}
rules:
  - apiGroups: [""]
    resources: [services]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "agentrewind:cluster-dns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "agentrewind:cluster-dns"}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: "agentrewind:cluster-dns"}
EOF
start cluster-dns "$root/bin/cluster-tools/cluster-dns" --kubeconfig "$CLUSTER_DIR/kubeconfig/cluster-dns.kubeconfig" \
  --listen "$BRIDGE_IP:$DNS_PORT" --domain "$CLUSTER_DOMAIN"
# It listens once its Service cache has synced.
wait_for cluster-dns 60 bash -c "exec 3<>/dev/tcp/$BRIDGE_IP/$DNS_PORT"

# --- containerd: a second one, never Docker's ---------------------------------------------------------
write_config "$CLUSTER_DIR/config/containerd.toml" <<EOF
version = 2
root = "$CLUSTER_DIR/containerd/root"
state = "$CLUSTER_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_DIR/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # No CAP_SYS_RESOURCE in this VM: runc cannot lower oom_score_adj below the caller's.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$CLUSTER_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
    max_conf_num = 1
EOF

# Pods on the bridge's subnet, routes only to the pod and service subnets (no default route, no DNS),
# no masquerading; the firewall plugin lets pod traffic through Docker's FORWARD DROP policy.
write_config "$CLUSTER_DIR/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/networks",
        "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "${BRIDGE_IP%.*.*}.1.0", "rangeEnd": "${BRIDGE_IP%.*.*}.255.254", "gateway": "$BRIDGE_IP"}]],
        "routes": [{"dst": "$SERVICE_CIDR"}]
      }
    },
    {"type": "firewall", "backend": "iptables"}
  ]
}
EOF

start containerd "$(command -v containerd)" --config "$CLUSTER_DIR/config/containerd.toml" --log-level warn
wait_for containerd 60 ctr --address "$CONTAINERD_SOCK" version

# --- The sandbox image: the static pause binary FROM scratch, imported (nothing is pulled) ------------
if ! grep -qx "$PAUSE_IMAGE" <<<"$(ctr_k8s images ls -q)"; then
  log "building and importing $PAUSE_IMAGE"
  ctx=$CLUSTER_DIR/pause-build
  mkdir -p "$ctx"
  cp "$root/bin/cluster-tools/pause" "$ctx/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build -q -t "$PAUSE_IMAGE" "$ctx" >/dev/null 2>&1
  docker save "$PAUSE_IMAGE" | ctr_k8s images import - >/dev/null
  # Leave Docker's image store as it was.
  docker rmi "$PAUSE_IMAGE" >/dev/null
  rm -rf "$ctx"
fi

# --- kubelet and kube-proxy ---------------------------------------------------------------------------
write_config "$CLUSTER_DIR/config/resolv.conf" </dev/null # pods get only cluster-dns (clusterDNS), never the host's resolvers
write_config "$CLUSTER_DIR/config/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $BRIDGE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# cgroup v1: kubelet 1.37 runs on it only when told to; the machine has swap off but say so anyway.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
# No CAP_SYS_RESOURCE: the kubelet may not lower its own oom_score_adj.
oomScoreAdj: 0
podLogsDir: $CLUSTER_DIR/pod-logs
resolvConf: $CLUSTER_DIR/config/resolv.conf
clusterDNS: [$BRIDGE_IP]
clusterDomain: $CLUSTER_DOMAIN
serializeImagePulls: false
maxPods: 110
# A shared developer machine: do not evict or garbage-collect images for a full-ish disk.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
EOF
write_config "$CLUSTER_DIR/config/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $CLUSTER_DIR/kubeconfig/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$BRIDGE_IP/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
# Zero: leave the host's conntrack sysctls as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF

start kubelet "$K8S_BIN/kubelet" --config "$CLUSTER_DIR/config/kubelet.yaml" \
  --kubeconfig "$CLUSTER_DIR/kubeconfig/kubelet.kubeconfig" --root-dir "$CLUSTER_DIR/kubelet" \
  --hostname-override "$NODE_NAME" --node-ip "$BRIDGE_IP" --v=1
start kube-proxy "$K8S_BIN/kube-proxy" --config "$CLUSTER_DIR/config/kube-proxy.yaml" --v=1

node_ready() {
  [[ $(kubectl_admin get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
wait_for kubelet 120 node_ready
# Pods need their namespace's default ServiceAccount, which the controller-manager creates.
wait_for kube-controller-manager 60 kubectl_admin get serviceaccount default -n default
wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz

install -m 600 "$CLUSTER_DIR/kubeconfig/admin.kubeconfig" "$ADMIN_KUBECONFIG"
log "node $NODE_NAME Ready in $((SECONDS - start_time))s; export KUBECONFIG=$ADMIN_KUBECONFIG"
