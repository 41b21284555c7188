package kube_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// notApplicable lists the conformance cases whose semantics a Kubernetes
// namespace does not have, and why.
var notApplicable = map[string]string{
	"TTLFilter": "sub-second TTL (300 ms): Lease durations are whole seconds",
	"Reap":      "sub-second TTL (500 ms) and a 20 ms --older-than: Lease durations are whole seconds",
}

// TestConformance runs the shared catalog suite on the kube:// backend,
// each case in a namespace of its own on the real API server.
func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		name := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		if why, ok := notApplicable[name]; ok {
			t.Skip("not applicable to kube://: " + why)
		}
		cfg, ns := kubetestenv.Setup(t)
		// ConcurrentWriters registers 200 modules (five API requests each)
		// and heartbeats each once: on a loaded two-core machine that takes
		// longer than the 10 s default lease, so the first ones would expire
		// before the count. A longer default keeps the case about writes.
		// Not whole seconds: stored as 61 s, as DefaultTTL must tell
		// (DefaultTTLTold).
		cat, err := kube.New(cfg, ns, switchboard.Options{DefaultTTL: time.Minute + 500*time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	})
}

// TestLimits runs the shared input-limits suite on the kube:// backend.
func TestLimits(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog {
		cfg, ns := kubetestenv.Setup(t)
		cat, err := kube.New(cfg, ns, switchboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	})
}

// TestTrafficConformance runs the shared traffic-state suite on the
// kube:// backend: weight, zone and the draining state round-trip through
// the TinyModule's spec. kube:// stores no checks (the kubelet's probes
// judge the pods), so it runs the suite's form for such catalogs: a
// registration with a check is refused (ChecksRefused), and the cases of
// check results (HealthEvents, HealthInvalid, HealthOutputCut,
// DrainingAndCritical) skip, since kube.Catalog is no HealthSetter.
func TestTrafficConformance(t *testing.T) {
	catalogtest.TrafficWithoutChecks(t, func(t *testing.T) switchboard.Catalog {
		cfg, ns := kubetestenv.Setup(t)
		cat, err := kube.New(cfg, ns, switchboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return cat
	})
}
