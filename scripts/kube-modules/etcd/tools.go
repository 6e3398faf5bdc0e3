//go:build tools

// Package tools pins the etcd server scripts/kube-binaries builds from this module
// (`go.etcd.io/etcd/server/v3` is etcd's own main package), with go.sum pinning every module.
package tools

import _ "go.etcd.io/etcd/server/v3"
