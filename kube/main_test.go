package kube_test

import (
	"testing"

	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// TestMain starts one real kube-apiserver for the package (see kubetestenv).
func TestMain(m *testing.M) { kubetestenv.Main(m) }
