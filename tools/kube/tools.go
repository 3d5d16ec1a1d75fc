//go:build tools

// Package kube only pins the versions of the binaries build.sh builds: a
// real Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager and etcd)
// for tests. It is a module of its own so perflab's go.mod never sees them.
//
// etcd is v3.7.0, not a 3.6.x: k8s.io/kubernetes v1.37.2 requires
// go.etcd.io/etcd/server/v3 v3.7.0 (the etcd it is tested with), so one
// module cannot select an older one. etcd's main package is the server
// module's root.
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
