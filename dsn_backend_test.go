package switchboard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// Open without the backend's package linked names the import to add, in
// one line. This package's tests link sqlite and postgres only.
func TestOpenMissingBackendNamesImport(t *testing.T) {
	for _, tt := range []struct{ dsn, want string }{
		{"kube://default", `dsn "kube://default": backend kube is not linked into this program: add import _ "github.com/switchboard-io/switchboard/kube" (linked: postgres, sqlite)`},
		{"https://h:8443", `dsn "https://h:8443": backend https is not linked into this program: add import _ "github.com/switchboard-io/switchboard/remote" (linked: postgres, sqlite)`},
	} {
		_, err := switchboard.Open(context.Background(), tt.dsn, switchboard.Options{})
		if !errors.Is(err, switchboard.ErrUnknownBackend) {
			t.Fatalf("Open(%q) = %v, want ErrUnknownBackend", tt.dsn, err)
		}
		if err.Error() != tt.want {
			t.Errorf("Open(%q):\n got %s\nwant %s", tt.dsn, err, tt.want)
		}
	}
}
