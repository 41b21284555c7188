package remote

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// FuzzServerDSN: any string is either a server DSN that both
// switchboard.ParseDSN and Open take, with one server per entry of its
// list, or an invalid DSN for both (never a panic).
func FuzzServerDSN(f *testing.F) {
	for _, s := range []string{
		"http://h1:7400,h2:7400,h3:7400", "https://[::1]:7400,h2/p", "http://h1,,h2", "http://h1:7400,h2:99999",
		"http://u@h1,h2", "http://h1,h2?x=1", "http://h1,h2#f", "HTTP://H1,H2/a/b/", "http://,", "http://h1/%zz", "http://00#", "http://00:",
	} {
		f.Add(s)
	}
	lookupHost = func(context.Context, string) ([]string, error) {
		return nil, &net.DNSError{Err: "no lookups in the fuzz test", IsNotFound: true}
	}
	f.Cleanup(func() { lookupHost = net.DefaultResolver.LookupHost })
	f.Fuzz(func(t *testing.T, s string) {
		d, perr := switchboard.ParseDSN(s)
		c, oerr := Open(context.Background(), s, Config{})
		if perr != nil {
			if oerr == nil {
				c.Close()
				t.Fatalf("Open took %q, which ParseDSN refused: %v", s, perr)
			}
			return
		}
		if d.Scheme != "http" && d.Scheme != "https" {
			return
		}
		if oerr != nil {
			if !errors.Is(oerr, switchboard.ErrInvalid) {
				t.Fatalf("Open(%q): %v, not an invalid DSN", s, oerr)
			}
			t.Fatalf("ParseDSN took %q, which Open refused: %v", s, oerr)
		}
		defer c.Close()
		_, rest, _ := strings.Cut(s, "://")
		authority, _, _ := strings.Cut(rest, "/")
		if got, want := len(c.Servers()), strings.Count(authority, ",")+1; got > want || got < 1 {
			t.Fatalf("%q: %d servers, want at most %d", s, got, want)
		}
	})
}
