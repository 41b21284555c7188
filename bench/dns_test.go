package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDNSPart runs the DNS part small, against a switchboard binary built
// here and the floor (this test binary run again): every figure is
// measured and the table has its rows.
func TestDNSPart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the switchboard binary")
	}
	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	build.Dir = ".." // the main module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	shape := dnsShape{instances: 100, names: 10, sockets: 2, rate: 200, window: 300 * time.Millisecond, samples: 5}
	res, err := measureDNS(context.Background(), bin, shape)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []dnsRow{res.serve, res.floor} {
		if r.QPS <= 0 || r.RateAchieved <= 0 || !(r.P50 > 0 && r.P50 <= r.P99) || r.Errors != 0 {
			t.Errorf("row %+v", r)
		}
	}
	if res.propSamples != 5 || res.propMissing != 0 || !(res.propP50 > 0 && res.propP50 <= res.propP99) {
		t.Errorf("registration → answer: %d samples, %d missing, p50 %v p99 %v", res.propSamples, res.propMissing, res.propP50, res.propP99)
	}
	if res.rssEmpty <= 0 || res.rssLoaded <= 0 || res.rssAfter <= 0 {
		t.Errorf("RSS %d %d %d", res.rssEmpty, res.rssLoaded, res.rssAfter)
	}
	var out bytes.Buffer
	printDNS(&out, res)
	for _, want := range []string{"100 live instances over 10 names", "| queries/s, closed loop |", "at 200 q/s: p99", "registration → answered", "serve's RSS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
