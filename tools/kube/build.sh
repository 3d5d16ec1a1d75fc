#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler, kube-controller-manager and etcd at the versions pinned in
# this module's go.mod into a cache directory keyed by those versions,
#   ${PERFLAB_KUBE_CACHE:-$HOME/.cache/perflab-kube}/<k8s>-<etcd>/bin
# skipping any binary already there, and prints that directory (only that,
# on stdout; progress goes to stderr). The first build takes a while
# (about 20 minutes for the first three on 2 cores, kube-scheduler the
# longest, kube-apiserver reusing most of its packages; kube-controller-
# manager added about 6 more, 100 s of CPU, with those packages cached);
# later ones are instant.
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

# The missing binaries in one go build: one action graph compiles the
# packages they share once and links one while compiling the next, where
# three builds in turn left a core idle through each link. -w drops DWARF
# (as -s drops the symbol table): nobody debugs these, and it shortens
# the links. Names and packages: etcd's main package is the server
# module's root (go.etcd.io/etcd/server/v3).
names=(etcd kube-scheduler kube-apiserver kube-controller-manager)
pkgs=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
want=() wantpkgs=()
for i in "${!names[@]}"; do
  [ -x "$bin/${names[$i]}" ] || { want+=("${names[$i]}"); wantpkgs+=("${pkgs[$i]}"); }
done
if [ "${#want[@]}" -gt 0 ]; then
  echo "kube: building ${want[*]}" >&2
  start=$SECONDS
  # Into a temporary directory first: an interrupted build leaves nothing
  # that a later run would take for a finished binary. go build names each
  # binary after its package's last element without a /vN: etcd's is
  # "server".
  tmp=$(mktemp -d "$bin/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # The version stamp only for Kubernetes' binaries: the last -ldflags a
  # package matches wins.
  go build -trimpath -ldflags="-s -w" -ldflags="k8s.io/kubernetes/cmd/...=-s -w $kver" -o "$tmp/" "${wantpkgs[@]}"
  for n in "${want[@]}"; do
    out=$n
    [ "$n" = etcd ] && out=server
    mv -f "$tmp/$out" "$bin/$n"
  done
  echo "kube: built ${want[*]} in $((SECONDS - start))s" >&2
fi
echo "$bin"
