# Sourced by .ci/run: a real Kubernetes control plane for the tests, with
# no kubelet: etcd, kube-apiserver (RBAC on, token auth), kube-scheduler
# and kube-controller-manager running only the Job and the
# PersistentVolume binder controllers, on free loopback ports, everything
# in a throwaway directory. The binaries are built once from tools/kube (their
# own Go module, pinned versions) into a cache; set PERFLAB_KUBE_BIN to a
# directory holding kube-apiserver, kube-scheduler,
# kube-controller-manager and etcd to use those instead. Exports KUBECONFIG (an admin kubeconfig: a static token of a
# user in system:masters) and PERFLAB_TEST_KUBE=1. stop_kube stops the
# processes and removes the directory; a watcher does the same when the
# shell that sourced this exits, in case a later trap replaced the one set
# here.
#
# What a test sees, since no kubelet and only two controllers run:
# - A Job gets its pods (the Job controller) and a PersistentVolumeClaim
#   its matching PersistentVolume (the binder); no other controller runs
#   (no garbage collector, namespace, node-lifecycle or ServiceAccount
#   controller), so what follows holds for everything else.
# - Nodes are whatever the test creates (with status at create, or through
#   the status subresource); the scheduler binds pods to them (spec.nodeName)
#   and they then stay Pending forever, since no kubelet runs them.
# - A pod bound to a node is only deleted with gracePeriodSeconds=0 (else
#   it waits for a kubelet, forever, with a deletionTimestamp); a deleted
#   namespace stays Terminating (no namespace controller empties it).
# - No ServiceAccount controller: see the admission plugins below.

# The repository root, from where this file lies (not the working
# directory, nor git: a copy of the tree has no .git).
_kube_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# _kube_free_port prints a loopback port nothing listens on, from a random
# start, none of those given as arguments. It picks below the kernel's
# ephemeral range (ip_local_port_range, 32768 by default): a port picked
# inside it was once taken by an outgoing connection before etcd bound it
# ("bind: address already in use" for its peer port, 2026-12-02).
_kube_free_port() {
  local low=32768 _high
  read -r low _high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$low" -gt 10200 ] 2>/dev/null || low=32768
  local port=$((10000 + RANDOM % (low - 10200))) tries=0 taken
  while :; do
    taken=
    case " $* " in *" $port "*) taken=1 ;; esac
    if [ -z "$taken" ] && ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
    port=$((port + 1)); tries=$((tries + 1))
    if [ "$tries" -ge 200 ]; then
      echo "kube: no free port" >&2
      return 1
    fi
  done
}

# _kube_wait NAME PID LOG CHECK... runs CHECK until it succeeds, for up to
# two minutes, giving up early if PID died; on failure it prints the tail
# of LOG and returns 1.
_kube_wait() {
  local name=$1 pid=$2 log=$3 tries=0
  shift 3
  until "$@" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 600 ] || ! kill -0 "$pid" 2>/dev/null; then
      if kill -0 "$pid" 2>/dev/null; then
        echo "kube: $name did not become ready in 2 minutes; its log ($log) ends:" >&2
      else
        echo "kube: $name exited; its log ($log) ends:" >&2
      fi
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

start_kube() {
  local bin
  if [ -n "${PERFLAB_KUBE_BIN:-}" ]; then
    bin=$PERFLAB_KUBE_BIN
  else
    # Instant when the cache has them; the first build takes about 20
    # minutes on 2 cores.
    bin=$(bash "$_kube_root/tools/kube/build.sh") || {
      echo "kube: building the binaries (tools/kube/build.sh) failed" >&2
      return 1
    }
  fi
  local b
  for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do
    if [ ! -x "$bin/$b" ]; then
      echo "kube: $bin/$b is missing" >&2
      return 1
    fi
  done

  KUBE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/perflab-kube.XXXXXX")
  local dir=$KUBE_DIR
  KUBE_PIDS=()

  # The watcher: when this shell is gone, so are the processes and the
  # directory. It reads the pids from the directory, as they start.
  local shell_pid=$$
  (
    trap '' INT TERM
    while kill -0 "$shell_pid" 2>/dev/null && [ -d "$dir" ]; do sleep 2; done
    if [ -f "$dir/pids" ]; then
      # Reverse order: the controller-manager, the scheduler, the
      # apiserver, then etcd.
      # shellcheck disable=SC2046
      kill $(tac "$dir/pids") 2>/dev/null || true
      sleep 2
      # shellcheck disable=SC2046
      kill -9 $(cat "$dir/pids") 2>/dev/null || true
    fi
    rm -rf "$dir"
  ) >/dev/null 2>&1 &
  KUBE_WATCHER=$!
  disown "$KUBE_WATCHER" 2>/dev/null || true
  # Added to the EXIT trap already set, not in its place.
  local prev=""
  if [ -n "$(trap -p EXIT)" ]; then
    eval "prev=$(trap -p EXIT | sed -e 's/^trap -- //' -e 's/ EXIT$//')"
  fi
  case "$prev" in *stop_kube*) ;; *) trap "${prev:+$prev; }stop_kube" EXIT ;; esac

  local etcd_port peer_port api_port sched_port cm_port
  etcd_port=$(_kube_free_port) &&
    peer_port=$(_kube_free_port "$etcd_port") &&
    api_port=$(_kube_free_port "$etcd_port" "$peer_port") &&
    sched_port=$(_kube_free_port "$etcd_port" "$peer_port" "$api_port") &&
    cm_port=$(_kube_free_port "$etcd_port" "$peer_port" "$api_port" "$sched_port") || {
    stop_kube
    return 1
  }

  # The service-account key pair (the apiserver signs tokens with one half
  # and checks them with the other) and the admin's static token.
  if ! openssl genrsa -out "$dir/sa.key" 2048 >/dev/null 2>&1 ||
    ! openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" >/dev/null 2>&1; then
    echo "kube: openssl could not make the service-account key pair" >&2
    stop_kube
    return 1
  fi
  local token
  token=$(openssl rand -hex 32)
  printf '%s,perflab-admin,perflab-admin,"system:masters"\n' "$token" >"$dir/tokens.csv"
  chmod 600 "$dir/tokens.csv"

  "$bin/etcd" --name perflab --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "perflab=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync \
    >"$dir/etcd.log" 2>&1 &
  local etcd_pid=$!
  KUBE_PIDS+=("$etcd_pid"); echo "$etcd_pid" >>"$dir/pids"
  if ! _kube_wait etcd "$etcd_pid" "$dir/etcd.log" \
    curl -fsS "http://127.0.0.1:$etcd_port/health"; then
    stop_kube
    return 1
  fi

  # Admission: the defaults, less two that would need controllers that do
  # not run here.
  # - ServiceAccount: it gives every pod the namespace's "default"
  #   ServiceAccount and refuses the pod while that does not exist; only
  #   the ServiceAccount controller (kube-controller-manager) creates it,
  #   in every namespace, including those a test creates on the fly. Off,
  #   pods are taken as they are (nothing runs them, so the token volume
  #   it would add has no use); creating "default" in each namespace
  #   instead would put that burden on every test.
  # - TaintNodesByCondition: it taints every new Node with
  #   node.kubernetes.io/not-ready:NoSchedule, unconditionally, and only
  #   the node-lifecycle controller removes that taint once the node is
  #   Ready; kept on, no pod would ever be scheduled on a test's node.
  # A loopback --advertise-address is refused by the endpoint reconciler
  # (it keeps the "kubernetes" Service's endpoints, of no use here): none.
  # --authorization-mode=Node,RBAC as a real cluster has it, so RBAC
  # denies what a Role does not grant (the admin is in system:masters).
  "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none \
    --secure-port "$api_port" \
    --cert-dir "$dir/certs" \
    --authorization-mode Node,RBAC \
    --token-auth-file "$dir/tokens.csv" \
    --service-account-key-file "$dir/sa.pub" \
    --service-account-signing-key-file "$dir/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.96.0.0/16 \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --profiling=false \
    >"$dir/kube-apiserver.log" 2>&1 &
  local api_pid=$!
  KUBE_PIDS+=("$api_pid"); echo "$api_pid" >>"$dir/pids"
  local server="https://127.0.0.1:$api_port"
  # Ready, and the bootstrap has made the "default" namespace.
  if ! _kube_wait kube-apiserver "$api_pid" "$dir/kube-apiserver.log" \
    curl -fsSk -H "Authorization: Bearer $token" "$server/readyz" ||
    ! _kube_wait kube-apiserver "$api_pid" "$dir/kube-apiserver.log" \
      curl -fsSk -H "Authorization: Bearer $token" "$server/api/v1/namespaces/default"; then
    stop_kube
    return 1
  fi

  # The serving certificate the apiserver made for itself in --cert-dir
  # (the file holds the certificate and the CA that signed it).
  local ca="$dir/certs/apiserver.crt"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: perflab
  cluster:
    server: $server
    certificate-authority: "$ca"
users:
- name: perflab-admin
  user:
    token: $token
contexts:
- name: perflab
  context:
    cluster: perflab
    user: perflab-admin
    namespace: default
current-context: perflab
EOF
  chmod 600 "$dir/kubeconfig"
  if ! curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" "$server/version" >/dev/null 2>&1; then
    echo "kube: the apiserver's certificate ($ca) does not verify for $server" >&2
    stop_kube
    return 1
  fi

  # The scheduler as the admin (the token is in system:masters); one
  # scheduler, so no leader election.
  "$bin/kube-scheduler" \
    --kubeconfig "$dir/kubeconfig" \
    --authentication-kubeconfig "$dir/kubeconfig" \
    --authorization-kubeconfig "$dir/kubeconfig" \
    --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$sched_port" \
    --cert-dir "$dir/scheduler-certs" \
    >"$dir/kube-scheduler.log" 2>&1 &
  local sched_pid=$!
  KUBE_PIDS+=("$sched_pid"); echo "$sched_pid" >>"$dir/pids"
  # /readyz includes the informers' sync, so it schedules once ready.
  if ! _kube_wait kube-scheduler "$sched_pid" "$dir/kube-scheduler.log" \
    curl -fsSk "https://127.0.0.1:$sched_port/readyz"; then
    stop_kube
    return 1
  fi

  # The controller-manager with only the controllers a test's Job needs
  # (upstream names, cmd/kube-controller-manager/names): the Job
  # controller, which makes a Job's pods and marks it Complete or Failed
  # from their phases, and the PersistentVolume binder, which binds a
  # claim (deploy/kubernetes' results PVC) to a PersistentVolume the test
  # creates; the scheduler does not place a pod whose claim is unbound.
  # As the admin, so no per-controller service accounts (that would need
  # the serviceaccount-token controller); one instance, no leader election.
  # The port is free when picked, and below the ephemeral range; should
  # something still take it before the bind, then again on another port,
  # up to three times.
  local cm_pid try
  for try in 1 2 3; do
    "$bin/kube-controller-manager" \
      --kubeconfig "$dir/kubeconfig" \
      --authentication-kubeconfig "$dir/kubeconfig" \
      --authorization-kubeconfig "$dir/kubeconfig" \
      --controllers job-controller,persistentvolume-binder-controller \
      --use-service-account-credentials=false \
      --leader-elect=false \
      --bind-address 127.0.0.1 --secure-port "$cm_port" \
      --cert-dir "$dir/controller-manager-certs" \
      >"$dir/kube-controller-manager.log" 2>&1 &
    cm_pid=$!
    KUBE_PIDS+=("$cm_pid"); echo "$cm_pid" >>"$dir/pids"
    if _kube_wait kube-controller-manager "$cm_pid" "$dir/kube-controller-manager.log" \
      curl -fsSk "https://127.0.0.1:$cm_port/healthz" 2>"$dir/kube-controller-manager.wait"; then
      break
    fi
    if [ "$try" -lt 3 ] && ! kill -0 "$cm_pid" 2>/dev/null &&
      grep -q "address already in use" "$dir/kube-controller-manager.log"; then
      # Forgotten, so that nothing kills its pid once reused.
      wait "$cm_pid" 2>/dev/null || true
      unset 'KUBE_PIDS[-1]'
      sed -i "/^$cm_pid\$/d" "$dir/pids"
      cm_port=$(_kube_free_port "$etcd_port" "$peer_port" "$api_port" "$sched_port" "$cm_port") || {
        stop_kube
        return 1
      }
      continue
    fi
    cat "$dir/kube-controller-manager.wait" >&2
    stop_kube
    return 1
  done

  export KUBECONFIG="$dir/kubeconfig"
  export PERFLAB_TEST_KUBE=1
  echo "kube: apiserver $server ($("$bin/kube-apiserver" --version 2>/dev/null), etcd $("$bin/etcd" --version 2>/dev/null | head -n 1 | awk '{print $NF}')); KUBECONFIG=$KUBECONFIG"
}

stop_kube() {
  local i pid alive
  if [ -n "${KUBE_PIDS+set}" ] && [ "${#KUBE_PIDS[@]}" -gt 0 ]; then
    # Controller-manager, scheduler, apiserver, etcd: the reverse of the
    # start.
    for ((i = ${#KUBE_PIDS[@]} - 1; i >= 0; i--)); do
      kill "${KUBE_PIDS[$i]}" 2>/dev/null || true
    done
    for i in $(seq 50); do
      alive=
      for pid in "${KUBE_PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && alive=1
      done
      [ -z "$alive" ] && break
      sleep 0.1
    done
    for pid in "${KUBE_PIDS[@]}"; do
      kill -9 "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
  fi
  KUBE_PIDS=()
  if [ -n "${KUBE_WATCHER:-}" ]; then
    # It ignores TERM (to outlive a Ctrl-C and clean up after it).
    kill -9 "$KUBE_WATCHER" 2>/dev/null || true
    KUBE_WATCHER=
  fi
  if [ -n "${KUBE_DIR:-}" ]; then
    if [ "${KUBECONFIG:-}" = "$KUBE_DIR/kubeconfig" ]; then
      unset KUBECONFIG PERFLAB_TEST_KUBE
    fi
    rm -rf "$KUBE_DIR"
    KUBE_DIR=
  fi
}
