//go:build tools

// Package tools pins the commands scripts/kube-binaries builds from this module: go.mod
// requires k8s.io/kubernetes, with a replace for every staging module it requires at v0.0.0
// (replaces apply only in the main module, so `go install k8s.io/kubernetes/...@v1.X.Y` cannot
// work), and go.sum pins every module the build reads.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
