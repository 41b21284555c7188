//go:build !nokube

package main

// The Kubernetes backend (kube://NAMESPACE). It is the larger part of the
// binary and of its first build; -tags nokube leaves it out (see
// link_nokube.go).
import _ "github.com/switchboard-io/switchboard/kube"
