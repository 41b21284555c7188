package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// -tags nokube,nonats builds a switchboard without the Kubernetes client
// and the embedded NATS broker (none of their packages linked), which says
// so when asked for them: kube:// exits 2, nats exits 1, each with one line
// naming the tag.
func TestLeanBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI again (-short)")
	}
	deps, err := exec.Command("go", "list", "-deps", "-tags", "nokube,nonats", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(deps)) {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "github.com/nats-io/nats-server") ||
			p == "github.com/switchboard-io/switchboard/kube" || p == "github.com/switchboard-io/switchboard/natswire/embedded" {
			t.Errorf("-tags nokube,nonats links %s", p)
		}
	}
	lean := filepath.Join(t.TempDir(), "switchboard")
	if out, err := exec.Command("go", "build", "-tags", "nokube,nonats", "-o", lean, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nokube,nonats: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ls", "--dsn", "kube://default"}, 2, "switchboard: unknown catalog backend: kube:// is left out of this switchboard (built with -tags nokube); build it without that tag; run 'switchboard ls --help'\n"},
		{[]string{"nats", "--data", filepath.Join(t.TempDir(), "nats")}, 1, "switchboard: the embedded NATS broker is left out of this switchboard (built with -tags nonats): build it without that tag, or run nats-server and point TINY_NATS_URL at it\n"},
	} {
		cmd := exec.Command(lean, tc.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || stderr.String() != tc.want {
			t.Errorf("%v: exit %d, stderr\n %q\nwant exit %d and\n %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
