#!/usr/bin/env bash
# Checks the control plane .ci/kube.sh started (start_kube), through its
# KUBECONFIG, with curl only:
#  1. a Node perflab-test-node with 4 nvidia.com/gpu (status at create,
#     Ready=True), and no taint on it;
#  2. a pod asking 1 GPU is bound to it (spec.nodeName) within seconds;
#  3. a pod asking 8 GPUs gets PodScheduled=False, reason Unschedulable,
#     "0/1 nodes are available: 1 Insufficient nvidia.com/gpu";
#  4. RBAC is real: a ServiceAccount's token (TokenRequest) may not list
#     pods.
# It removes what it made (and what an interrupted run left) so it can be
# rerun.
#   source .ci/kube.sh; start_kube; tools/kube/smoke.sh
set -euo pipefail

: "${KUBECONFIG:?KUBECONFIG is not set: source .ci/kube.sh and run start_kube first}"
field() { sed -n "s/^ *$1: *//p" "$KUBECONFIG" | head -n 1 | tr -d '"'; }
server=$(field server)
token=$(field token)
ca=$(field certificate-authority)
ns=default
node=perflab-test-node

api() { # METHOD PATH [BODY]: prints the body; fails on an HTTP error
  local method=$1 path=$2 body=${3:-}
  curl -fsS --cacert "$ca" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -X "$method" \
    ${body:+--data "$body"} "$server$path"
}
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
cleanup() {
  local p
  for p in perflab-smoke-gpu1 perflab-smoke-gpu8; do
    api DELETE "/api/v1/namespaces/$ns/pods/$p?gracePeriodSeconds=0" >/dev/null 2>&1 || true
  done
  api DELETE "/api/v1/namespaces/$ns/serviceaccounts/perflab-smoke" >/dev/null 2>&1 || true
  api DELETE "/api/v1/nodes/$node" >/dev/null 2>&1 || true
}
cleanup
trap cleanup EXIT

echo "smoke: apiserver $server, $(api GET /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"

# 1. The node, status included at create (no kubelet will ever post one).
api POST /api/v1/nodes '{
  "apiVersion": "v1", "kind": "Node",
  "metadata": {"name": "'"$node"'", "labels": {"kubernetes.io/hostname": "'"$node"'"}},
  "status": {
    "capacity":    {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"},
    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"},
    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "perflab smoke test node"}]
  }
}' >/dev/null
n=$(api GET "/api/v1/nodes/$node?pretty=true")
grep -q '"nvidia.com/gpu": "4"' <<<"$n" || fail "the node has no 4 nvidia.com/gpu in its status: $n"
if grep -q '"taints"' <<<"$n"; then fail "the node was tainted: $n"; fi
echo "smoke: node $node: 4 nvidia.com/gpu allocatable, Ready=True, no taints"

pod() { # NAME GPUS
  api POST "/api/v1/namespaces/$ns/pods" '{
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "'"$1"'"},
    "spec": {"containers": [{"name": "engine", "image": "registry.k8s.io/pause:3.10",
      "resources": {"limits": {"nvidia.com/gpu": "'"$2"'"}}}]}
  }' >/dev/null
}

# 2. One GPU: bound.
start=$(date +%s%N)
pod perflab-smoke-gpu1 1
for _ in $(seq 100); do
  p=$(api GET "/api/v1/namespaces/$ns/pods/perflab-smoke-gpu1?pretty=true")
  grep -q "\"nodeName\": \"$node\"" <<<"$p" && break
  sleep 0.1
done
grep -q "\"nodeName\": \"$node\"" <<<"$p" || fail "the 1-GPU pod was not bound in 10s: $p"
echo "smoke: 1-GPU pod bound to $node in $((($(date +%s%N) - start) / 1000000))ms"

# 3. Eight GPUs: unschedulable, and why.
pod perflab-smoke-gpu8 8
for _ in $(seq 100); do
  p=$(api GET "/api/v1/namespaces/$ns/pods/perflab-smoke-gpu8?pretty=true")
  grep -q '"reason": "Unschedulable"' <<<"$p" && break
  sleep 0.1
done
grep -q '"reason": "Unschedulable"' <<<"$p" || fail "the 8-GPU pod got no Unschedulable condition in 10s: $p"
grep -q '"nodeName"' <<<"$p" && fail "the 8-GPU pod was bound: $p"
msg=$(sed -n 's/^ *"message": "\(.*\)",\{0,1\}$/\1/p' <<<"$p" | head -n 1)
grep -q 'Insufficient nvidia.com/gpu' <<<"$msg" || fail "unexpected message: $msg"
echo "smoke: 8-GPU pod: PodScheduled=False Unschedulable: $msg"

# 4. RBAC: a ServiceAccount with no Role may not list pods.
api POST "/api/v1/namespaces/$ns/serviceaccounts" \
  '{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "perflab-smoke"}}' >/dev/null
satoken=$(api POST "/api/v1/namespaces/$ns/serviceaccounts/perflab-smoke/token" \
  '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}' |
  sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
[ -n "$satoken" ] || fail "no token from the TokenRequest"
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$ca" -H "Authorization: Bearer $satoken" \
  "$server/api/v1/namespaces/$ns/pods")
[ "$code" = 403 ] || fail "a ServiceAccount without a Role listed pods: HTTP $code (want 403)"
echo "smoke: RBAC: the ServiceAccount's token authenticates and is refused pods (403)"

echo "smoke: all checks passed"
