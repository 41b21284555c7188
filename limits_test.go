package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

func wantFieldErr(t *testing.T, err error, field, reason string) {
	t.Helper()
	var fe *switchboard.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(fe.Reason, reason) {
		t.Fatalf("want an invalid %s (%q), got %v", field, reason, err)
	}
}

func TestNormalizeCapabilityLimit(t *testing.T) {
	in := switchboard.Instance{Name: "svc", Type: "writer", Address: "127.0.0.1:1"}
	for i := range switchboard.MaxCapabilities {
		in.Capabilities = append(in.Capabilities, fmt.Sprintf("c%d", i))
	}
	if _, err := switchboard.Normalize(in); err != nil {
		t.Fatalf("%d capabilities: %v", len(in.Capabilities), err)
	}
	in.Capabilities = append(in.Capabilities, "one-more")
	_, err := switchboard.Normalize(in)
	wantFieldErr(t, err, "capabilities", "65 given; at most 64")
	// Duplicates count too: the request itself is bounded.
	in.Capabilities = make([]string, 200000)
	for i := range in.Capabilities {
		in.Capabilities[i] = "same"
	}
	_, err = switchboard.Normalize(in)
	wantFieldErr(t, err, "capabilities", "at most 64")
}

func TestValidateTTL(t *testing.T) {
	if err := backend.ValidateTTL(0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := backend.ValidateTTL(time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	wantFieldErr(t, backend.ValidateTTL(time.Hour+1, time.Hour), "ttl", "at most 1h0m0s")
}

func TestValidateHeartbeatIDs(t *testing.T) {
	if err := backend.ValidateHeartbeatIDs([]string{"a", "b.c:d-e_f"}); err != nil {
		t.Fatal(err)
	}
	wantFieldErr(t, backend.ValidateHeartbeatIDs([]string{"ok", "no way"}), "ids[1]", "only letters")
	wantFieldErr(t, backend.ValidateHeartbeatIDs([]string{""}), "ids[0]", "1 to 253")
	wantFieldErr(t, backend.ValidateHeartbeatIDs([]string{strings.Repeat("x", 254)}), "ids[0]", "1 to 253")
	wantFieldErr(t, backend.ValidateHeartbeatIDs(make([]string, switchboard.MaxHeartbeatIDs+1)), "ids", "at most 10000")
}

func TestValidateHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		every, ttl time.Duration
		ok         bool
	}{
		{3 * time.Second, 10 * time.Second, true},
		{5 * time.Second, 10 * time.Second, true},
		{5*time.Second + 1, 10 * time.Second, false},
		{9 * time.Second, 10 * time.Second, false},
		{0, 10 * time.Second, false},
		{10 * time.Millisecond, 20 * time.Millisecond, true},
		{10 * time.Millisecond, time.Hour, true},
	} {
		err := switchboard.ValidateHeartbeat("heartbeat", tc.every, tc.ttl)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateHeartbeat(%s, %s) = %v", tc.every, tc.ttl, err)
		}
	}
	// A heartbeat under 10ms renews in a busy loop: refused, naming the
	// field and the floor, whatever the TTL.
	for _, every := range []time.Duration{time.Nanosecond, time.Microsecond, 10*time.Millisecond - 1} {
		wantFieldErr(t, switchboard.ValidateHeartbeat("heartbeat", every, time.Hour), "heartbeat", "must be at least 10ms")
	}
	wantFieldErr(t, switchboard.ValidateHeartbeat("heartbeat", -time.Second, time.Hour), "heartbeat", "must be positive")
	// No heartbeat fits a TTL under 20ms: the TTL is named, whatever the
	// interval.
	for _, every := range []time.Duration{time.Nanosecond, 10 * time.Millisecond, time.Second} {
		wantFieldErr(t, switchboard.ValidateHeartbeat("heartbeat", every, 20*time.Millisecond-1), "ttl", "must be at least 20ms")
		wantFieldErr(t, switchboard.ValidateHeartbeat("heartbeat", every, time.Millisecond), "ttl", "must be at least 20ms")
	}
}

// Bootstrap refuses a heartbeat interval under MinHeartbeatInterval (a busy
// loop against the catalog) or negative, and a TTL too short for any
// heartbeat, before anything is stored.
func TestBootstrapHeartbeatFloor(t *testing.T) {
	cat := testkit.OpenSQLite(t) // default TTL 10 s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := switchboard.Instance{Name: "svc", Type: "writer", Address: "127.0.0.1:1", TTL: time.Second}
	_, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: time.Nanosecond})
	wantFieldErr(t, err, "HeartbeatInterval", "must be at least 10ms")
	_, err = switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: -time.Second})
	wantFieldErr(t, err, "HeartbeatInterval", "must be positive")
	in.TTL = 0 // the catalog's default: still refused before the write
	_, err = switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: time.Millisecond})
	wantFieldErr(t, err, "HeartbeatInterval", "must be at least 10ms")
	in.TTL = 15 * time.Millisecond
	_, err = switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 10 * time.Millisecond})
	wantFieldErr(t, err, "ttl", "must be at least 20ms")
	all, err := cat.List(ctx, switchboard.Query{All: true})
	if err != nil || len(all) != 0 {
		t.Fatalf("rejected bootstraps left rows: %v %v", all, err)
	}
	in.TTL = 20 * time.Millisecond
	r, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: switchboard.MinHeartbeatInterval})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := switchboard.Bootstrap(ctx, nil, in, switchboard.BootstrapOptions{}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("Bootstrap with a nil catalog: %v", err)
	}
}

// Bootstrap refuses a heartbeat interval above half the TTL, given or the
// catalog's default, and leaves nothing registered.
func TestBootstrapHeartbeatAtMostHalfTTL(t *testing.T) {
	cat := testkit.OpenSQLite(t) // default TTL 10 s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := switchboard.Instance{Name: "svc", Type: "writer", Address: "127.0.0.1:1", TTL: time.Second}
	_, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 800 * time.Millisecond})
	wantFieldErr(t, err, "HeartbeatInterval", "at most half the ttl (1s)")
	in.TTL = 0
	_, err = switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 6 * time.Second})
	wantFieldErr(t, err, "HeartbeatInterval", "at most half the ttl (10s)")
	all, err := cat.List(ctx, switchboard.Query{All: true})
	if err != nil || len(all) != 0 {
		t.Fatalf("rejected bootstraps left rows: %v %v", all, err)
	}
	in.TTL = time.Second
	r, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

func TestValidateLease(t *testing.T) {
	if err := switchboard.ValidateLease("compactor-lock", "pod-7 (10.0.0.7)"); err != nil {
		t.Fatal(err)
	}
	wantFieldErr(t, switchboard.ValidateLease("", "h"), "lease name", "must not be empty")
	wantFieldErr(t, switchboard.ValidateLease("n", ""), "lease holder", "must not be empty")
	wantFieldErr(t, switchboard.ValidateLease(strings.Repeat("n", 254), "h"), "lease name", "at most 253")
	wantFieldErr(t, switchboard.ValidateLease("n", strings.Repeat("h", 1025)), "lease holder", "at most 1024")
	wantFieldErr(t, switchboard.ValidateLease("n", "a\x00b"), "lease holder", "without NUL")
}

// FuzzRedactDSN: a password written in a DSN never survives redaction, and
// redaction never panics, whatever the rest of the DSN.
func FuzzRedactDSN(f *testing.F) {
	f.Add("postgres", "user", "s3cr3t", "127.0.0.1:5432/db?sslmode=disable")
	f.Add("postgresql", "u", "p%40ss", "h/db")
	f.Add("postgres", "", "x", "h")
	f.Add("postgres", "u", "s3/cr3t", "h/db")
	f.Add("postgres", "u", "s3#cr3t", "h:5432/db?x=1")
	f.Fuzz(func(t *testing.T, scheme, user, pw, rest string) {
		dsn := scheme + "://" + user + ":" + pw + "@" + rest
		out := switchboard.RedactDSN(dsn)
		_ = switchboard.RedactDSN(rest)
		// A password may hold ':', and '/', '?' or '#' not percent-encoded
		// (which end a URL's authority early), except right after digits
		// only: "u:5432/x@h" reads as the host u with port 5432, and
		// "u:5432,x/y@h" as hosts u:5432 and x.
		lead := pw
		if i := strings.IndexAny(pw, ",/?#"); i >= 0 {
			lead = pw[:i]
		}
		if len(pw) < 4 || strings.ContainsAny(user, "@/?#:") || strings.HasPrefix(user, "[") || strings.Contains(pw, "@") ||
			strings.ContainsAny(scheme, "@/?#:") ||
			strings.ContainsAny(pw, "/?#") && strings.Trim(lead, "0123456789") == "" ||
			strings.Contains(scheme+user, pw) || strings.Contains(rest, pw) || strings.Contains("xxxxx", pw) {
			return // ambiguous: the password is not the only place its text appears
		}
		if strings.Contains(out, pw) {
			t.Fatalf("RedactDSN(%q) = %q shows the password", dsn, out)
		}
		// A PostgreSQL DSN whose password ends the authority early does
		// not parse; its error must not show the password either. (Only
		// where quoting the DSN escapes nothing, which could spell the
		// password out of other bytes, "\x00" + "00", and the password is
		// no piece of the error's fixed text.)
		const fixed = "postgres DSN needs a host, e.g. postgres://user@127.0.0.1:5432/db; not a valid URL (a special character in the password must be percent-encoded)"
		pg := scheme == "postgres" || scheme == "postgresql"
		if _, err := switchboard.ParseDSN(dsn); err != nil && pg && strings.ContainsAny(pw, "/?#") && !strings.Contains(fixed, pw) &&
			strconv.Quote(dsn) == `"`+dsn+`"` && strings.Contains(err.Error(), pw) {
			t.Fatalf("ParseDSN(%q): error shows the password: %v", dsn, err)
		}
		q := "postgres://u@h/db?a=1&password=" + pw + "&b=2"
		if strings.ContainsAny(pw, "&' \t\n\f\r") { // spaces end a value; quotes around it are not part of it
			return
		}
		if out := switchboard.RedactDSN(q); strings.Contains(out, pw) {
			t.Fatalf("RedactDSN(%q) = %q shows the password", q, out)
		}
	})
}
