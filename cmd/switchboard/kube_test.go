//go:build !nokube

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// kubeCatalog opens a catalog on a namespace of its own of a real API
// server, and a context for the test's calls to it (a minute).
func kubeCatalog(t *testing.T) (*kube.Catalog, string, context.Context) {
	t.Helper()
	cfg, ns := kubetestenv.Setup(t)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return cat, ns, ctx
}

// TestLsKube: `switchboard ls --dsn kube://NAMESPACE --json` lists the
// TinyModules of a namespace on a real API server (KUBECONFIG points at it),
// live ones by default and stale ones with --all.
func TestLsKube(t *testing.T) {
	cat, ns, ctx := kubeCatalog(t)
	for _, in := range []switchboard.Instance{
		{Name: "common-module", Type: kube.TypeModule, Address: "10.0.0.7:8483", Version: "1.2.0", TTL: time.Hour},
		{Name: "http-module", Type: kube.TypeModule, Address: "nats://tinymodule.http-module.msg", Version: "0.9.1", TTL: time.Hour},
		{Name: "dead-module", Type: kube.TypeModule, Address: "10.0.0.9:8483", TTL: time.Second},
	} {
		if _, err := cat.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// The dead module's 1 s Lease runs out (no heartbeats).
	time.Sleep(1500 * time.Millisecond)

	type row struct {
		ID, Name, Type, Address, Version string
		Stale                            bool
		Metadata                         map[string]string
	}
	ls := func(args ...string) []row {
		t.Helper()
		code, out, errOut := cli(t, append([]string{"--dsn", "kube://" + ns, "ls", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("ls exit %d: %s", code, errOut)
		}
		var rows []row
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("ls --json output %q: %v", out, err)
		}
		return rows
	}
	rows := ls()
	if len(rows) != 2 || rows[0].Name != "common-module" || rows[0].Address != "10.0.0.7:8483" || rows[0].Version != "1.2.0" ||
		rows[1].Name != "http-module" || rows[1].Address != "nats://tinymodule.http-module.msg" || rows[0].Stale || rows[1].Stale ||
		rows[0].Type != kube.TypeModule || rows[0].Metadata[kube.MetaNamespace] != ns {
		t.Fatalf("ls --json: %+v", rows)
	}
	all := ls("--all")
	if len(all) != 3 || all[0].Name != "common-module" || all[1].Name != "dead-module" || !all[1].Stale {
		t.Fatalf("ls --all --json: %+v", all)
	}
	// A namespace that is not an RFC 1123 label is bad input (exit 2).
	if code, _, errOut := cli(t, "--dsn", "kube://Not_A_Namespace", "ls"); code != 2 {
		t.Fatalf("bad namespace: exit %d (%s)", code, errOut)
	}
}

// TestDrainKube: `switchboard drain ID --dsn kube://NAMESPACE` drains a
// TinyModule (spec.draining) and --undo puts it back; ls shows the state;
// an id with no TinyModule exits 1.
func TestDrainKube(t *testing.T) {
	cat, ns, ctx := kubeCatalog(t)
	if _, err := cat.Register(ctx, switchboard.Instance{Name: "common-module", Type: kube.TypeModule, Address: "10.0.0.7:8483",
		TTL: time.Hour, Weight: 300, Zone: "eu-west-1a"}); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Zone, Status string
		Weight           int
		Draining         bool
	}
	ls := func() row {
		t.Helper()
		code, out, errOut := cli(t, "--dsn", "kube://"+ns, "ls", "--json")
		var rows []row
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
			t.Fatalf("ls exit %d: %q %s", code, out, errOut)
		}
		return rows[0]
	}
	if r := ls(); r.Draining || r.Status != "passing" || r.Weight != 300 || r.Zone != "eu-west-1a" {
		t.Fatalf("ls before the drain: %+v", r)
	}
	code, out, errOut := cli(t, "--dsn", "kube://"+ns, "drain", "common-module")
	if code != 0 || !strings.Contains(out, "drained common-module (status draining)") {
		t.Fatalf("drain: exit %d: %q %s", code, out, errOut)
	}
	if r := ls(); !r.Draining || r.Status != "draining" || r.Weight != 300 {
		t.Fatalf("ls after the drain: %+v", r)
	}
	if code, out, errOut = cli(t, "--dsn", "kube://"+ns, "drain", "common-module", "--undo"); code != 0 {
		t.Fatalf("drain --undo: exit %d: %q %s", code, out, errOut)
	}
	if r := ls(); r.Draining || r.Status != "passing" {
		t.Fatalf("ls after the undo: %+v", r)
	}
	if code, _, errOut = cli(t, "--dsn", "kube://"+ns, "drain", "ghost-module"); code != 1 || !strings.Contains(errOut, "no instance with id") {
		t.Fatalf("drain of an id with no TinyModule: exit %d: %s", code, errOut)
	}
}

// BenchmarkLsKube1000: `switchboard ls --dsn kube://NS` over 1,000 live
// TinyModules (the table, in this process: open, two lists, render).
func BenchmarkLsKube1000(b *testing.B) {
	cfg, ns := kubetestenv.Setup(b)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 1000; i += 16 {
				if _, err := cat.Register(context.Background(), switchboard.Instance{
					Name: fmt.Sprintf("module-%04d", i), Type: kube.TypeModule,
					Address: fmt.Sprintf("10.0.%d.%d:8483", i/250, i%250), TTL: time.Hour,
				}); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"--dsn", "kube://" + ns, "ls"}, &out, &errb); code != 0 {
			b.Fatalf("ls: exit %d: %s", code, errb.String())
		}
		if n := strings.Count(out.String(), "\n"); n != 1001 {
			b.Fatalf("ls printed %d lines", n)
		}
	}
}
