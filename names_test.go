package switchboard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

func TestSanitizeName(t *testing.T) {
	long := strings.Repeat("a", 40) + "/" + strings.Repeat("b", 40) // 81 bytes
	tests := []struct {
		in   string
		want string
	}{
		{"github.com/tiny-systems/common-module", "github-com-tiny-systems-common-module"},
		{"common-module", "common-module"},
		{"Common_Module", "common-module"},
		{"HTTP Server", "http-server"},
		{"a", "a"},
		{"0", "0"},
		{"a--b", "a-b"},
		{"a_._b", "a-b"},
		{"  --a--  ", "a"},
		{"/leading/and/trailing/", "leading-and-trailing"},
		{"ÄÖÜ-module", "module"},        // non-ASCII runs collapse into the separator
		{"caf\u00e9-bar", "caf-bar"},    // é is outside [a-z0-9]
		{"a\u00e9\u00e9\u00e9b", "a-b"}, // a run of multibyte characters is ONE '-'
		{"MiXeD123CaSe", "mixed123case"},
		{strings.Repeat("x", 48), strings.Repeat("x", 48)},
		{strings.Repeat("x", 49), strings.Repeat("x", 48)},
		{strings.Repeat("x", 63), strings.Repeat("x", 48)},
		// Truncation keeps the distinctive tail, at the SDK's 48 characters.
		{long, strings.Repeat("a", 7) + "-" + strings.Repeat("b", 40)},
		{"github.com/some-very-long-organisation-name/and-a-very-long-repository/common-module",
			"on-name-and-a-very-long-repository-common-module"},
		// The cut would start on '-': it is trimmed, leaving fewer than 48.
		{strings.Repeat("a", 10) + "-" + strings.Repeat("b", 47), strings.Repeat("b", 47)},
		// The module SDK's own test vectors (pkg/utils/sanitize_test.go).
		{"Playground a84afb40: When a webhook is hit, post the body to a Slack channel",
			"webhook-is-hit-post-the-body-to-a-slack-channel"},
		{"What is the capital of France?", "what-is-the-capital-of-france"},
		{"  -- Hello, World! --  ", "hello-world"},
		{"a___b...c   d", "a-b-c-d"},
		// Pod names keep their distinctive suffix.
		{"tinysystems-http-module-v0-controller-manager-67fc65b5bc-6mdh8",
			"tp-module-v0-controller-manager-67fc65b5bc-6mdh8"},
		// Unicode lowercasing, as strings.ToLower in the SDK: the Kelvin sign is 'k'.
		{"\u212Aube-module", "kube-module"},
	}
	for _, tt := range tests {
		got, err := switchboard.SanitizeName(tt.in)
		if err != nil {
			t.Errorf("SanitizeName(%q): unexpected error %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) > switchboard.MaxNameLen {
			t.Errorf("SanitizeName(%q) = %q: %d bytes, more than %d", tt.in, got, len(got), switchboard.MaxNameLen)
		}
		if !switchboard.IsSanitized(got) {
			t.Errorf("IsSanitized(%q) = false for an output of SanitizeName", got)
		}
	}
}

func TestSanitizeNameEmpty(t *testing.T) {
	for _, in := range []string{"", "-", "---", "  ", "/._/", "日本語", "\x00\xff", "ÀÉ___", "ÑØ"} {
		got, err := switchboard.SanitizeName(in)
		if err == nil {
			t.Errorf("SanitizeName(%q) = %q, want ErrInvalidName", in, got)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalidName) || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("SanitizeName(%q) error %v is not ErrInvalidName/ErrInvalid", in, err)
		}
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "name" {
			t.Errorf("SanitizeName(%q) error %#v does not name the field \"name\"", in, err)
		} else if fe.Value != in {
			t.Errorf("SanitizeName(%q) error shows %q, not the name as given", in, fe.Value)
		}
		if got != "" {
			t.Errorf("SanitizeName(%q) returned %q with an error", in, got)
		}
	}
}

func TestIsSanitized(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"common-module", true},
		{"a", true},
		{strings.Repeat("z", 48), true},
		{strings.Repeat("z", 49), false},
		{"Common-module", false},
		{"common_module", false},
		{"-a", false},
		{"a-", false},
		{"a--b", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := switchboard.IsSanitized(tt.in); got != tt.want {
			t.Errorf("IsSanitized(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseNodeName(t *testing.T) {
	tests := []struct {
		in   string
		want switchboard.NodeName
	}{
		{"flow1.common-module.node1", switchboard.NodeName{Flow: "flow1", Module: "common-module", Node: "node1"}},
		{"flow1.common-module.node1:out", switchboard.NodeName{Flow: "flow1", Module: "common-module", Node: "node1", Port: "out"}},
		{"F_1.m.N-2:_in-put_", switchboard.NodeName{Flow: "F_1", Module: "m", Node: "N-2", Port: "_in-put_"}},
		{"a.0.b:1", switchboard.NodeName{Flow: "a", Module: "0", Node: "b", Port: "1"}},
		// The node may contain dots, as the TinySystems SDK allows; the
		// module is always the second part.
		{"a.b.c.d", switchboard.NodeName{Flow: "a", Module: "b", Node: "c.d"}},
		{"flow.module.node.sub:port", switchboard.NodeName{Flow: "flow", Module: "module", Node: "node.sub", Port: "port"}},
		{"f.common-module.router_1.2.x-y:_settings", switchboard.NodeName{Flow: "f", Module: "common-module", Node: "router_1.2.x-y", Port: "_settings"}},
		// The longest: a 253-character Kubernetes name and a 253-byte port.
		{"f.m." + strings.Repeat("n", 249) + ":" + strings.Repeat("p", 253),
			switchboard.NodeName{Flow: "f", Module: "m", Node: strings.Repeat("n", 249), Port: strings.Repeat("p", 253)}},
		// What the SDK creates: GenerateName "<8-char flow hash>.<module>.<component>-"
		// plus 5 random characters, with the longest (48-character) module.
		{"1a2b3c4d." + strings.Repeat("m", 48) + "." + strings.Repeat("c", 48) + "-x7k2q:_settings",
			switchboard.NodeName{Flow: "1a2b3c4d", Module: strings.Repeat("m", 48), Node: strings.Repeat("c", 48) + "-x7k2q", Port: "_settings"}},
	}
	for _, tt := range tests {
		got, err := switchboard.ParseNodeName(tt.in)
		if err != nil {
			t.Errorf("ParseNodeName(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseNodeName(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("ParseNodeName(%q).String() = %q", tt.in, s)
		}
		if full, _, _ := strings.Cut(tt.in, ":"); got.FullName() != full {
			t.Errorf("ParseNodeName(%q).FullName() = %q, want %q", tt.in, got.FullName(), full)
		}
	}
}

func TestParseNodeNameMalformed(t *testing.T) {
	tests := []struct {
		in     string
		reason string // a fragment of the error message
	}{
		{"", "empty"},
		{"flow.module", "three"},
		{"flow", "three"},
		{"f.m.a..b", "empty segment"},
		{"f.m.a.", "empty segment"},
		{"f.m..a:p", "empty segment"},
		{"f.m.a.b c", "node part"},
		{"f.m.a.b/c", "node part"},
		{".module.node", "flow part is empty"},
		{"flow..node", "module part is empty"},
		{"flow.module.", "node part is empty"},
		{"..", "empty"},
		{"flow.module.node:", "empty port"},
		{"flow.module.node:a:b", "port"},
		{"flow.module.node:a.b", "port"},
		{"flow.module.node: p", "port"},
		{"flow.Module.node", "sanitised"},
		{"flow.my_module.node", "sanitised"},
		{"flow.-module.node", "sanitised"},
		{"flow.a--b.node", "sanitised"},
		{"flow." + strings.Repeat("m", 64) + ".node", "sanitised"},
		{"flöw.module.node", "flow part"},
		{"flow.mödule.node", "module part"},
		{"flow.module.nöde", "node part"},
		{"flow.module.node:pört", "port"},
		{"flow.module.no de", "node part"},
		{"flow/x.module.node", "flow part"},
		{":port", "three"},
		// Longer than a Kubernetes name (253), or than a port may be.
		{"f.m." + strings.Repeat("n", 250), "is 254 bytes; at most 253"},
		{"f.m." + strings.Repeat("n", 250) + ":p", "is 254 bytes; at most 253"},
		{"f.m.n:" + strings.Repeat("p", 254), "port is 254 bytes; at most 253"},
		{"f.m." + strings.Repeat("n.", 4096) + "n", "at most 253"},
	}
	for _, tt := range tests {
		got, err := switchboard.ParseNodeName(tt.in)
		if err == nil {
			t.Errorf("ParseNodeName(%q) = %+v, want an error", tt.in, got)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalidName) {
			t.Errorf("ParseNodeName(%q) error %v is not ErrInvalidName", tt.in, err)
		}
		if !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("ParseNodeName(%q) error %q does not mention %q", tt.in, err, tt.reason)
		}
		if !strings.Contains(err.Error(), "node name") {
			t.Errorf("ParseNodeName(%q) error %q does not name the field", tt.in, err)
		}
		if got != (switchboard.NodeName{}) {
			t.Errorf("ParseNodeName(%q) returned %+v with an error", tt.in, got)
		}
	}
}

func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{
		"", "-", "a", "github.com/tiny-systems/common-module", "Common_Module", "ÄÖÜ-module",
		strings.Repeat("ab-", 30), strings.Repeat("a", 62) + "--" + "b", "\x00\xff\xfe", " a b ",
		strings.Repeat("x", 64), strings.Repeat("a", 10) + "-" + strings.Repeat("b", 62), "\u212A", "\u0130",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := switchboard.SanitizeName(in)
		if err != nil {
			if out != "" || !errors.Is(err, switchboard.ErrInvalidName) {
				t.Fatalf("SanitizeName(%q) = %q, %v", in, out, err)
			}
			// Only input without a single letter or digit may fail.
			for i := 0; i < len(in); i++ {
				if c := in[i] | 0x20; ('a' <= c && c <= 'z') || ('0' <= in[i] && in[i] <= '9') {
					t.Fatalf("SanitizeName(%q) failed although the input has %q", in, in[i])
				}
			}
			return
		}
		if out == "" || len(out) > switchboard.MaxNameLen {
			t.Fatalf("SanitizeName(%q) = %q: length %d", in, out, len(out))
		}
		if out[0] == '-' || out[len(out)-1] == '-' || strings.Contains(out, "--") {
			t.Fatalf("SanitizeName(%q) = %q: bad dashes", in, out)
		}
		for i := 0; i < len(out); i++ {
			c := out[i]
			if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
				t.Fatalf("SanitizeName(%q) = %q: byte %q outside [a-z0-9-]", in, out, c)
			}
		}
		again, err := switchboard.SanitizeName(out)
		if err != nil || again != out {
			t.Fatalf("SanitizeName not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if !switchboard.IsSanitized(out) {
			t.Fatalf("IsSanitized(%q) = false", out)
		}
	})
}

func FuzzParseNodeName(f *testing.F) {
	for _, s := range []string{
		"", "flow.module.node", "flow.module.node:port", "a.b.c.d", "a..c", "f.Mod.n", "f.m.n:",
		"f.m.n:a:b", "flöw.m.n", "f.common-module.n:out_1", ":", ".", "..", "..:",
		"f.m.a.b.c:p", "f.m.a..b", "f.m.a.:p",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := switchboard.ParseNodeName(in)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalidName) {
				t.Fatalf("ParseNodeName(%q) error %v is not ErrInvalidName", in, err)
			}
			return
		}
		if s := n.String(); s != in {
			t.Fatalf("ParseNodeName(%q).String() = %q", in, s)
		}
		if !switchboard.IsSanitized(n.Module) {
			t.Fatalf("ParseNodeName(%q): module %q not sanitised", in, n.Module)
		}
		if n.Flow == "" || n.Node == "" {
			t.Fatalf("ParseNodeName(%q) = %+v: empty part", in, n)
		}
		if len(n.FullName()) > switchboard.MaxNodeNameLen || len(n.Port) > switchboard.MaxPortLen {
			t.Fatalf("ParseNodeName(%q) accepted a name of %d bytes, port %d", in, len(n.FullName()), len(n.Port))
		}
		// The SDK's reading: the module is the second dot-separated part,
		// and a port is present exactly when the name has a colon.
		if parts := strings.Split(in, "."); len(parts) < 3 || parts[1] != n.Module {
			t.Fatalf("ParseNodeName(%q): module %q is not the second part", in, n.Module)
		}
		if (n.Port != "") != strings.Contains(in, ":") || (n.RequirePort() == nil) != (n.Port != "") {
			t.Fatalf("ParseNodeName(%q): port %q", in, n.Port)
		}
		again, err := switchboard.ParseNodeName(n.String())
		if err != nil || again != n {
			t.Fatalf("re-parse of %q = %+v, %v; want %+v", n.String(), again, err, n)
		}
	})
}
