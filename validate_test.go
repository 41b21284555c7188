package switchboard_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/millis"
)

func TestValidateAddressGood(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:8080",
		"0.0.0.0:1",
		"10.1.2.3:65535",
		"localhost:50051",
		"localhost.:50051",
		"my-service:80",
		"my_service.default.svc.cluster.local:9090",
		"xn--bcher-kva.example:443",
		strings.Repeat("a", 63) + ".example:80",
		"[::1]:8080",
		"[2001:db8::1]:443",
		"[::ffff:192.0.2.1]:80",
		"[fe80::1%eth0]:80",
		"[fe80::1%12]:80",
		"nats://tinymodule.common-module.msg",
		"nats://a",
		"nats://_INBOX.abc123",
		"nats://tinymodule.caf\u00e9.msg",
	} {
		if err := switchboard.ValidateAddress(addr); err != nil {
			t.Errorf("ValidateAddress(%q): %v", addr, err)
		}
	}
}

func TestValidateAddressBad(t *testing.T) {
	for _, addr := range []string{
		"",
		"localhost",
		"localhost:",
		":8080",
		"127.0.0.1",
		"127.0.0.1:0",
		"127.0.0.1:65536",
		"127.0.0.1:99999999999999999999",
		"127.0.0.1:080",
		"127.0.0.1:00",
		"127.0.0.1:+1",
		"127.0.0.1:-1",
		"127.0.0.1: 80",
		"127.0.0.1:80 ",
		"127.0.0.1:http",
		"127.0.0.1:1_000",
		"::1:8080",
		"2001:db8::1:443",
		"::1",
		"[::1]",
		"[::1]:",
		"[::1]:0",
		"[::1:8080",
		"::1]:8080",
		"[]:80",
		"[127.0.0.1]:80",
		"[localhost]:80",
		"[fe80::1%]:80",
		"[fe80::1%a]b]:80",
		"[fe80::1%a b]:80",
		"[fe80::1%a/b]:80",
		"[[::1]]:80",
		"a[::1]:80",
		"host name:80",
		"-host:80",
		"host-:80",
		"a..b:80",
		".:80",
		"..:80",
		"ho$t:80",
		"h\u00f6st:80",
		strings.Repeat("a", 64) + ".example:80",
		strings.Repeat("abcdefghi.", 26) + "com:80", // 263 bytes
		// Malformed IPv4 addresses must not pass as DNS names.
		"256.1.1.1:80",
		"1.2.3.4.5:80",
		"01.2.3.4:80",
		"1.2.3:80",
		"123:80",
		"http://example.com:80",
		"grpc://example.com:80",
		"tcp://127.0.0.1:80",
		"NATS://subject",
		"nats://",
		"nats://a b",
		"nats://a\tb",
		"nats://a.*",
		"nats://a.>",
		"nats://*",
		"nats://>",
		"nats://a*.b",
		"nats://a.b>",
		"nats://.a",
		"nats://a.",
		"nats://a..b",
		"nats://a\x00b",
		"nats://a\x7fb",
		"nats://a\xffb",
		"nats://" + strings.Repeat("a", 256),
	} {
		err := switchboard.ValidateAddress(addr)
		if err == nil {
			t.Errorf("ValidateAddress(%q) = nil, want an error", addr)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalidAddress) || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("ValidateAddress(%q) error %v is not ErrInvalidAddress", addr, err)
		}
		if !strings.HasPrefix(err.Error(), "address") {
			t.Errorf("ValidateAddress(%q) error %q does not name the field", addr, err)
		}
		if switchboard.IsDialable(addr) {
			t.Errorf("IsDialable(%q) = true for an invalid address", addr)
		}
	}
}

func TestValidateAddressErrorMessages(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"::1:8080", "brackets"},
		{"127.0.0.1:65536", "1 to 65535"},
		{"localhost", "missing port"},
		{":80", "missing host"},
		{"http://x:80", "nats://"},
		{"nats://a.*", "wildcards"},
		{"[127.0.0.1]:80", "IPv6"},
	}
	for _, tt := range tests {
		err := switchboard.ValidateAddress(tt.addr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ValidateAddress(%q) = %v, want a message containing %q", tt.addr, err, tt.want)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		addr string
		host string
		port int
	}{
		{"127.0.0.1:8080", "127.0.0.1", 8080},
		{"example.com:1", "example.com", 1},
		{"example.com:65535", "example.com", 65535},
		{"[::1]:443", "[::1]", 443},
		{"[fe80::1%eth0]:80", "[fe80::1%eth0]", 80},
	}
	for _, tt := range tests {
		host, port, err := switchboard.SplitHostPort(tt.addr)
		if err != nil || host != tt.host || port != tt.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d", tt.addr, host, port, err, tt.host, tt.port)
		}
	}
	for _, addr := range []string{"", "x", "x:", ":1", "x:0", "x:65536", "x:01", "x:+1", "::1:80", "[::1:80", "::1]:80"} {
		host, port, err := switchboard.SplitHostPort(addr)
		if err == nil {
			t.Errorf("SplitHostPort(%q) = %q, %d, nil; want an error", addr, host, port)
		} else if !errors.Is(err, switchboard.ErrInvalidAddress) {
			t.Errorf("SplitHostPort(%q) error %v is not ErrInvalidAddress", addr, err)
		}
	}
}

func TestIsDialable(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"[::1]:8080", true},
		{"svc.ns:80", true},
		{"nats://tinymodule.m.msg", false},
		{"::1:8080", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := switchboard.IsDialable(tt.addr); got != tt.want {
			t.Errorf("IsDialable(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestValidateCapability(t *testing.T) {
	good := []string{
		"a", "Z", "0", switchboard.CapTraceIngestion, switchboard.CapStorage, switchboard.CapRouting,
		switchboard.CapQueryExecution, switchboard.CapStorageMaintenance, switchboard.CapKafkaIngestion,
		"gpu", "x.y:z-w_v", "9-lives", "a" + strings.Repeat("_", 62),
		strings.Repeat("c", 63),
	}
	for _, c := range good {
		if err := switchboard.ValidateCapability(c); err != nil {
			t.Errorf("ValidateCapability(%q) (len %d): %v", c, len(c), err)
		}
	}
	bad := []string{
		"", strings.Repeat("c", 64), "_a", "-a", ".a", ":a", "a b", "a/b", "a*", "é", "aé", "a\x00", "a\n",
	}
	for _, c := range bad {
		err := switchboard.ValidateCapability(c)
		if err == nil {
			t.Errorf("ValidateCapability(%q) (len %d) = nil, want an error", c, len(c))
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "capability") {
			t.Errorf("ValidateCapability(%q) error %q: want ErrInvalid naming the capability field", c, err)
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	keys := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	tests := []struct {
		name string
		md   map[string]string
		ok   bool
		want string // fragment of the error
	}{
		{"nil", nil, true, ""},
		{"empty", map[string]string{}, true, ""},
		{"64 keys", keys(64), true, ""},
		{"65 keys", keys(65), false, "64 keys"},
		{"key 128", map[string]string{strings.Repeat("k", 128): "v"}, true, ""},
		{"key 129", map[string]string{strings.Repeat("k", 129): "v"}, false, "metadata key"},
		{"empty key", map[string]string{"": "v"}, false, "metadata key"},
		{"value 1024", map[string]string{"k": strings.Repeat("v", 1024)}, true, ""},
		{"value 1025", map[string]string{"k": strings.Repeat("v", 1025)}, false, "metadata value for k"},
		{"empty value", map[string]string{"k": ""}, true, ""},
		{"utf8", map[string]string{"zöne": "éu-west-1 ☁"}, true, ""},
		{"bad utf8 key", map[string]string{"k\xff": "v"}, false, "metadata key"},
		{"bad utf8 value", map[string]string{"k": "v\xc3"}, false, "metadata value for k"},
		{"NUL in key", map[string]string{"k\x00": "v"}, false, "without NUL"},
		{"NUL in value", map[string]string{"k": "a\x00b"}, false, "without NUL"},
	}
	for _, tt := range tests {
		err := switchboard.ValidateMetadata(tt.md)
		if tt.ok {
			if err != nil {
				t.Errorf("%s: ValidateMetadata: %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: ValidateMetadata = nil, want an error", tt.name)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ValidateMetadata error %q: want ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "0b3c2f4e-1111-4222-8333-444455556666", "node:1.zone_a-b", strings.Repeat("i", 253)} {
		if err := switchboard.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", strings.Repeat("i", 254), "a b", "a/b", "é"} {
		if err := switchboard.ValidateID(id); err == nil || !errors.Is(err, switchboard.ErrInvalid) || !strings.HasPrefix(err.Error(), "id") {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalid naming id", id, err)
		}
	}
}

func validInstance() switchboard.Instance {
	return switchboard.Instance{
		ID:           "inst-1",
		Name:         "github.com/tiny-systems/Common_Module",
		Type:         switchboard.TypeWriter,
		Address:      "127.0.0.1:9000",
		Capabilities: []string{"storage", "gpu", "storage", "routing", "gpu"},
		Version:      "v1.2.3",
		Metadata:     map[string]string{"zone": "a"},
		Components:   json.RawMessage(`{"components":[]}`),
		TTL:          5 * time.Second,
	}
}

func TestNormalize(t *testing.T) {
	in := validInstance()
	out, err := switchboard.Normalize(in)
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	if out.Name != "github-com-tiny-systems-common-module" {
		t.Errorf("Name = %q, want the sanitised name", out.Name)
	}
	if got, want := strings.Join(out.Capabilities, ","), "storage,gpu,routing"; got != want {
		t.Errorf("Capabilities = %q, want de-duplicated in order %q", got, want)
	}
	if out.ID != in.ID || out.Type != in.Type || out.Address != in.Address || out.Version != in.Version ||
		out.TTL != in.TTL || string(out.Components) != string(in.Components) || out.Metadata["zone"] != "a" {
		t.Errorf("Normalize changed fields it should keep: %+v", out)
	}
	// The input is not modified and the output does not alias it.
	if len(in.Capabilities) != 5 || in.Name != "github.com/tiny-systems/Common_Module" {
		t.Errorf("Normalize modified its input: %+v", in)
	}
	out.Metadata["zone"] = "changed"
	out.Components[0] = '['
	if in.Metadata["zone"] != "a" || in.Components[0] != '{' {
		t.Errorf("Normalize output shares maps or slices with its input")
	}

	// Empty optional fields are fine.
	minimal := switchboard.Instance{Name: "m", Type: "t", Address: "nats://x"}
	if _, err := switchboard.Normalize(minimal); err != nil {
		t.Errorf("Normalize(minimal): %v", err)
	}
	// Unknown capability tokens are kept, never dropped.
	in = validInstance()
	in.Capabilities = []string{"some.custom:cap-1"}
	if out, err := switchboard.Normalize(in); err != nil || len(out.Capabilities) != 1 || out.Capabilities[0] != "some.custom:cap-1" {
		t.Errorf("Normalize with a custom capability = %v, %v", out.Capabilities, err)
	}
}

func TestNormalizeComponents(t *testing.T) {
	// A valid JSON string of exactly 256 KiB.
	exact := json.RawMessage(`"` + strings.Repeat("x", switchboard.MaxComponentsSize-2) + `"`)
	if len(exact) != 256<<10 {
		t.Fatalf("test setup: len = %d", len(exact))
	}
	in := validInstance()
	in.Components = exact
	if _, err := switchboard.Normalize(in); err != nil {
		t.Errorf("Normalize with 256 KiB of components: %v", err)
	}
	in.Components = json.RawMessage(`"` + strings.Repeat("x", switchboard.MaxComponentsSize-1) + `"`)
	if _, err := switchboard.Normalize(in); err == nil || !strings.Contains(err.Error(), "components") {
		t.Errorf("Normalize with 256 KiB + 1 of components = %v, want an error naming components", err)
	}
	for _, bad := range []string{`{`, `{"a":}`, `nope`, `{"a":1}x`, "\"\xff\""} {
		in.Components = json.RawMessage(bad)
		if _, err := switchboard.Normalize(in); err == nil || !strings.Contains(err.Error(), "components") || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Normalize with components %q = %v, want an error naming components", bad, err)
		}
	}
	for _, good := range []string{`null`, `[]`, `{"name":"x","ports":[{"schema":{}}]}`, ` {"a": 1} `} {
		in.Components = json.RawMessage(good)
		if _, err := switchboard.Normalize(in); err != nil {
			t.Errorf("Normalize with components %q: %v", good, err)
		}
	}
}

func TestNormalizeErrorsNameTheField(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*switchboard.Instance)
	}{
		{"name", func(in *switchboard.Instance) { in.Name = "" }},
		{"name", func(in *switchboard.Instance) { in.Name = "///" }},
		{"id", func(in *switchboard.Instance) { in.ID = "has space" }},
		{"id", func(in *switchboard.Instance) { in.ID = strings.Repeat("i", 254) }},
		{"type", func(in *switchboard.Instance) { in.Type = "" }},
		{"type", func(in *switchboard.Instance) { in.Type = "-writer" }},
		{"type", func(in *switchboard.Instance) { in.Type = strings.Repeat("t", 64) }},
		{"address", func(in *switchboard.Instance) { in.Address = "" }},
		{"address", func(in *switchboard.Instance) { in.Address = "::1:80" }},
		{"address", func(in *switchboard.Instance) { in.Address = "nats://a.*" }},
		{"version", func(in *switchboard.Instance) { in.Version = strings.Repeat("v", 254) }},
		{"version", func(in *switchboard.Instance) { in.Version = "v1\n" }},
		{"version", func(in *switchboard.Instance) { in.Version = "v\xff" }},
		{"capability", func(in *switchboard.Instance) { in.Capabilities = []string{"ok", "not ok"} }},
		{"capability", func(in *switchboard.Instance) { in.Capabilities = []string{""} }},
		{"metadata", func(in *switchboard.Instance) { in.Metadata = map[string]string{"": "x"} }},
		{"metadata", func(in *switchboard.Instance) { in.Metadata = map[string]string{"k": strings.Repeat("v", 1025)} }},
		{"components", func(in *switchboard.Instance) { in.Components = json.RawMessage("{") }},
		{"ttl", func(in *switchboard.Instance) { in.TTL = -time.Second }},
		{"ttl", func(in *switchboard.Instance) { in.TTL = time.Microsecond }},
	}
	for _, tt := range tests {
		in := validInstance()
		tt.mutate(&in)
		out, err := switchboard.Normalize(in)
		if err == nil {
			t.Errorf("Normalize with a bad %s = %+v, nil; want an error", tt.field, out)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Normalize with a bad %s: error %v is not ErrInvalid", tt.field, err)
		}
		if !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Normalize with a bad %s: error %q does not name the field", tt.field, err)
		}
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, tt.field) {
			t.Errorf("Normalize with a bad %s: error %#v is not a FieldError for it", tt.field, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"3s", 3 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"1ns", 1},
		{"+5s", 5 * time.Second},
	}
	for _, tt := range good {
		got, err := switchboard.ParseDuration("ttl", tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, reason string }{
		{"", "empty"},
		{"garbage", "not a duration"},
		{"3", "not a duration"},
		{"3 s", "not a duration"},
		{"0", "positive"},
		{"0s", "positive"},
		{"-1s", "positive"},
		{"-0s", "positive"},
		// Well-formed but too long for a time.Duration: said so, not
		// "not a duration".
		{"9999999999h", "too long; at most 2562047h"},
		{"2562048h", "too long"},
		{"3000000h1s", "too long"},
		{"-9999999999h", "too long"},
		{"1.5.s", "not a duration"},
		{"5sec", "not a duration"},
		{".s", "not a duration"},
	}
	for _, tt := range bad {
		got, err := switchboard.ParseDuration("discovery.ttl", tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", tt.in, got)
			continue
		}
		if got != 0 || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("ParseDuration(%q) = %v, %v; want 0 and ErrInvalid", tt.in, got, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "discovery.ttl") || !strings.Contains(msg, tt.reason) {
			t.Errorf("ParseDuration(%q) error %q: want the field name and %q", tt.in, msg, tt.reason)
		}
	}
}

// A long value is shown cut, but never inside a UTF-8 sequence, which the
// error would show as \xNN escapes.
func TestFieldErrorTruncatesOnARuneBoundary(t *testing.T) {
	for _, v := range []string{strings.Repeat("x", 79) + "é" + strings.Repeat("y", 50), strings.Repeat("x", 78) + "日本" + strings.Repeat("y", 50),
		strings.Repeat("x", 77) + "🙂" + strings.Repeat("y", 50)} {
		msg := switchboard.NewFieldError(nil, "f", v, "bad").Error()
		if !utf8.ValidString(msg) || strings.Contains(msg, `\x`) || !strings.Contains(msg, "…") {
			t.Errorf("Error() = %q: want the value cut on a rune boundary", msg)
		}
	}
}

// FuzzFieldError: a FieldError shows its value quoted, cut after at most
// 80 bytes, and, for a UTF-8 value, never inside a UTF-8 sequence.
func FuzzFieldError(f *testing.F) {
	f.Add("f", strings.Repeat("x", 79)+"é", "bad")
	f.Add("ttl", "", "must be positive")
	f.Fuzz(func(t *testing.T, field, value, reason string) {
		msg := switchboard.NewFieldError(nil, field, value, reason).Error()
		if value == "" {
			if msg != field+": "+reason {
				t.Fatalf("Error() = %q", msg)
			}
			return
		}
		if len(value) <= 80 {
			if msg != fmt.Sprintf("%s %q: %s", field, value, reason) {
				t.Fatalf("Error() = %q: want the whole value", msg)
			}
			return
		}
		for k := 80; k > 80-utf8.UTFMax; k-- {
			if msg == fmt.Sprintf("%s %q: %s", field, value[:k]+"…", reason) {
				if utf8.ValidString(value) && !utf8.ValidString(value[:k]) {
					t.Fatalf("Error() = %q: cut inside a UTF-8 sequence", msg)
				}
				return
			}
		}
		t.Fatalf("Error() = %q: want the value cut after at most 80 bytes", msg)
	})
}

func TestFieldError(t *testing.T) {
	err := error(&switchboard.FieldError{Field: "f", Value: "v", Reason: "bad"})
	if got := err.Error(); got != `f "v": bad` {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("a FieldError without a kind does not unwrap to ErrInvalid")
	}
	err = &switchboard.FieldError{Field: "f", Reason: "bad"}
	if got := err.Error(); got != "f: bad" {
		t.Errorf("Error() without value = %q", got)
	}
	long := strings.Repeat("x", 200)
	err = &switchboard.FieldError{Field: "f", Value: long, Reason: "bad"}
	if got := err.Error(); len(got) > 100 || !strings.HasSuffix(got, ": bad") {
		t.Errorf("Error() with a long value = %q, want it truncated", got)
	}
	for _, e := range []error{switchboard.ErrInvalidName, switchboard.ErrInvalidAddress, switchboard.ErrInvalidDSN} {
		if !errors.Is(e, switchboard.ErrInvalid) {
			t.Errorf("%v does not wrap ErrInvalid", e)
		}
	}
}

func FuzzValidateAddress(f *testing.F) {
	for _, s := range []string{
		"", "127.0.0.1:8080", "localhost:1", "[::1]:65535", "[fe80::1%eth0]:80", "::1:80", "[::1]:0",
		"host:080", "host:+1", "nats://a.b", "nats://a.*", "http://x:1", "[]:1", "[:1", "]:1",
		"256.1.1.1:80", "a..b:1", "[fe80::1%a]b]:80", "[::ffff:1.2.3.4]:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		err := switchboard.ValidateAddress(addr)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalidAddress) {
				t.Fatalf("ValidateAddress(%q) error %v is not ErrInvalidAddress", addr, err)
			}
			return
		}
		if strings.HasPrefix(addr, "nats://") {
			if switchboard.IsDialable(addr) {
				t.Fatalf("IsDialable(%q) = true for a NATS subject", addr)
			}
			if strings.ContainsAny(addr[len("nats://"):], " \t\r\n*>") {
				t.Fatalf("ValidateAddress accepted a subject with spaces or wildcards: %q", addr)
			}
			return
		}
		host, port, err := switchboard.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("ValidateAddress(%q) = nil but SplitHostPort fails: %v", addr, err)
		}
		if port < 1 || port > 65535 {
			t.Fatalf("SplitHostPort(%q) port %d out of range", addr, port)
		}
		if host+":"+strconv.Itoa(port) != addr {
			t.Fatalf("SplitHostPort(%q) = %q, %d: does not rebuild the address", addr, host, port)
		}
		// What we accept, the standard library (and so every dialer) reads the same way.
		nh, np, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("ValidateAddress(%q) = nil but net.SplitHostPort fails: %v", addr, err)
		}
		if np != strconv.Itoa(port) || strings.Trim(host, "[]") != nh {
			t.Fatalf("net.SplitHostPort(%q) = %q, %q; we split %q, %d", addr, nh, np, host, port)
		}
		if !switchboard.IsDialable(addr) {
			t.Fatalf("IsDialable(%q) = false for a valid host:port", addr)
		}
	})
}

func FuzzValidateCapability(f *testing.F) {
	for _, s := range []string{"", "a", "storage", "x.y:z-w_v", "_a", strings.Repeat("c", 63), strings.Repeat("c", 64), "é", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		err := switchboard.ValidateCapability(c)
		ok := len(c) >= 1 && len(c) <= 63
		for i := 0; ok && i < len(c); i++ {
			b := c[i]
			alnum := ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9')
			ok = alnum || (i > 0 && (b == '_' || b == '.' || b == ':' || b == '-'))
		}
		if (err == nil) != ok {
			t.Fatalf("ValidateCapability(%q) = %v, want ok=%v", c, err, ok)
		}
		if err != nil && !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("ValidateCapability(%q) error %v is not ErrInvalid", c, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"", "3s", "250ms", "0", "0s", "-1s", "1h30m", "garbage", "9999999999h", "+1ns", ".5s", "1e3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := switchboard.ParseDuration("field", s)
		if err != nil {
			if d != 0 || !errors.Is(err, switchboard.ErrInvalid) || !strings.HasPrefix(err.Error(), "field") {
				t.Fatalf("ParseDuration(%q) = %v, %v", s, d, err)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("ParseDuration(%q) accepted a non-positive %v", s, d)
		}
		if std, serr := time.ParseDuration(s); serr != nil || std != d {
			t.Fatalf("ParseDuration(%q) = %v, but time.ParseDuration = %v, %v", s, d, std, serr)
		}
	})
}

// TestRoundTTL: an instance TTL is stored rounded up to whole
// milliseconds on every backend; Normalize rounds the given one, and the
// largest Duration does not overflow into a negative TTL.
func TestRoundTTL(t *testing.T) {
	const maxMS = time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Millisecond, time.Millisecond},
		{time.Millisecond + time.Nanosecond, 2 * time.Millisecond},
		{5*time.Second + 400*time.Microsecond, 5*time.Second + time.Millisecond},
		{5*time.Second + 999999*time.Nanosecond, 5*time.Second + time.Millisecond},
		{10 * time.Second, 10 * time.Second},
		{maxMS, maxMS},
		{math.MaxInt64, maxMS},
	} {
		if got := millis.Round(tc.in); got != tc.want {
			t.Errorf("millis.Round(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if tc.in == 0 {
			continue
		}
		in := switchboard.Instance{Name: "n", Type: "writer", Address: "127.0.0.1:1", TTL: tc.in}
		out, err := switchboard.Normalize(in)
		if err != nil {
			t.Fatalf("Normalize with TTL %v: %v", tc.in, err)
		}
		if out.TTL != tc.want {
			t.Errorf("Normalize: TTL %v became %v, want %v", tc.in, out.TTL, tc.want)
		}
	}
}
