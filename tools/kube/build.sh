#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler and etcd at the versions pinned in
# this module's go.mod into a cache directory keyed by those versions,
#   ${PERFLAB_KUBE_CACHE:-$HOME/.cache/perflab-kube}/<k8s>-<etcd>/bin
# skipping any binary already there, and prints that directory (only that,
# on stdout; progress goes to stderr). The first build takes a while
# (about 20 minutes for the three on 2 cores, kube-scheduler the longest,
# kube-apiserver reusing most of its packages); later
# ones are instant.
set -euo pipefail
cd "$(dirname "$0")"

k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
bin="${PERFLAB_KUBE_CACHE:-$HOME/.cache/perflab-kube}/$k8s-$etcd/bin"
mkdir -p "$bin"

# The version the apiserver reports on /version, as the upstream release
# build stamps it (without it, v0.0.0-master).
major=${k8s#v}; major=${major%%.*}
minor=${k8s#v*.}; minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # name package [ldflags]
  local name=$1 pkg=$2 ld=${3:-}
  if [ -x "$bin/$name" ]; then return 0; fi
  echo "kube: building $name ($pkg)" >&2
  local start=$SECONDS
  # Into a temporary name first: an interrupted build leaves nothing that
  # a later run would take for a finished binary.
  go build -trimpath -ldflags="-s $ld" -o "$bin/.$name.tmp" "$pkg"
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "kube: built $name in $((SECONDS - start))s" >&2
}

# etcd's main package is the server module's root (go.etcd.io/etcd/server/v3).
build etcd go.etcd.io/etcd/server/v3
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kver"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kver"
echo "$bin"
