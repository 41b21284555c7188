package main

import "testing"

// The hint demo prints is a command the user can type: under go run (a
// temporary go-build directory, or the build cache) it is go run itself.
func TestInvokedAs(t *testing.T) {
	for _, tc := range []struct{ arg0, gocache, want string }{
		{"/tmp/go-build2206976748/b001/exe/switchboard", "/root/.cache/go-build", "go run ./cmd/switchboard"},
		{"/root/.cache/go-build/3a/3a5f0e9c1d2b-d/switchboard", "/root/.cache/go-build", "go run ./cmd/switchboard"},
		{"/work/.gocache/ab/ab12cd-d/switchboard", "/work/.gocache", "go run ./cmd/switchboard"},
		{"./sb", "/root/.cache/go-build", "./sb"},
		{"switchboard", "/root/.cache/go-build", "switchboard"},
		{"/usr/local/bin/switchboard", "/root/.cache/go-build", "/usr/local/bin/switchboard"},
		{"/root/.cache/go-buildx/switchboard", "/root/.cache/go-build", "/root/.cache/go-buildx/switchboard"},
		{"/opt/my tools/sb", "", "'/opt/my tools/sb'"},
	} {
		if got := invokedAsFrom(tc.arg0, tc.gocache); got != tc.want {
			t.Errorf("invokedAsFrom(%q, %q) = %q, want %q", tc.arg0, tc.gocache, got, tc.want)
		}
	}
}
