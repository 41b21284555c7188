package checks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
)

func checked(addr, target string) switchboard.Instance {
	return switchboard.Instance{ID: "i-1", Name: "db", Address: addr, Check: &switchboard.Check{Target: target, Interval: 10 * time.Second}}
}

// TestPolicyCheck: by default a check may target only its instance's own
// host (any port); checks.allow adds CIDRs, addresses and host names;
// anything else is an ErrInvalid FieldError on check.target.
func TestPolicyCheck(t *testing.T) {
	allow, err := checks.ParsePolicy("checks.allow", " 10.1.0.0/16, 192.168.7.7 ,db.internal, .svc.example.com, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := allow.String(), "10.1.0.0/16,192.168.7.7/32,fd00::/8,db.internal,.svc.example.com"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		policy   checks.Policy
		in       switchboard.Instance
		refused  bool
		mentions string
	}{
		{checks.Policy{}, switchboard.Instance{Address: "10.0.0.1:80"}, false, ""}, // no check
		{checks.Policy{}, checked("10.0.0.1:5432", "tcp://10.0.0.1:5432"), false, ""},
		{checks.Policy{}, checked("10.0.0.1:5432", "http://10.0.0.1:8080/health"), false, ""},
		{checks.Policy{}, checked("[::1]:5432", "tcp://[0:0::1]:22"), false, ""},
		{checks.Policy{}, checked("DB.example.com:5432", "grpc://db.example.com.:9000"), false, ""},
		{checks.Policy{}, checked("10.0.0.1:5432", "tcp://10.0.0.2:5432"), true, "10.0.0.1"},
		{checks.Policy{}, checked("10.0.0.1:5432", "http://169.254.169.254/latest/meta-data"), true, "169.254.169.254"},
		{checks.Policy{}, checked("db.example.com:5432", "tcp://10.0.0.1:5432"), true, "checks.allow"},
		{checks.Policy{}, checked("nats://module.x", "tcp://10.0.0.1:5432"), true, "no host:port"},
		{allow, checked("10.0.0.1:5432", "tcp://10.1.200.3:5432"), false, ""},
		{allow, checked("10.0.0.1:5432", "tcp://192.168.7.7:1"), false, ""},
		{allow, checked("10.0.0.1:5432", "tcp://192.168.7.8:1"), true, ""},
		{allow, checked("10.0.0.1:5432", "https://DB.internal/health"), false, ""},
		{allow, checked("10.0.0.1:5432", "https://a.svc.example.com/"), false, ""},
		{allow, checked("10.0.0.1:5432", "https://svc.example.com/"), true, ""},
		{allow, checked("10.0.0.1:5432", "https://evilsvc.example.com/"), true, ""},
		{allow, checked("10.0.0.1:5432", "grpc://[fd00::5]:9000"), false, ""},
		{allow, checked("10.0.0.1:5432", "grpc://[fe80::5]:9000"), true, ""},
	} {
		err := tc.policy.Check(tc.in)
		if !tc.refused {
			if err != nil {
				t.Errorf("Check(%s → %v) = %v, want allowed", tc.in.Address, tc.in.Check, err)
			}
			continue
		}
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "check.target" || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Check(%s → %s) = %v, want a FieldError on check.target wrapping ErrInvalid", tc.in.Address, tc.in.Check.Target, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.mentions) {
			t.Errorf("Check(%s → %s) = %q, want it to mention %q", tc.in.Address, tc.in.Check.Target, err, tc.mentions)
		}
	}
	// A target that does not parse is refused as ParseCheckTarget says.
	err = checks.Policy{}.Check(checked("10.0.0.1:1", "ftp://10.0.0.1/"))
	if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("Check(ftp://) = %v, want the parser's error", err)
	}
}

// TestParsePolicyErrors: what is neither a CIDR, an address nor a host
// name is an error naming the setting.
func TestParsePolicyErrors(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.1:80", "http://x", "a b", "-x-", "/8"} {
		_, err := checks.ParsePolicy("checks.allow", bad)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "checks.allow" {
			t.Errorf("ParsePolicy(%q) = %v, want a FieldError on checks.allow", bad, err)
		}
	}
	if p, err := checks.ParsePolicy("checks.allow", " , "); err != nil || len(p.Allow)+len(p.Hosts) != 0 {
		t.Errorf("ParsePolicy(\" , \") = %v, %v; want an empty policy", p, err)
	}
}

// FuzzParsePolicy: any list parses or is a FieldError on the setting,
// without panicking; a policy parsed reads back the same from its String.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"", "10.0.0.0/8", "::1,db", ".example.com, 1.2.3.4", "[::1]", "a..b", "10.0.0.1/8", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := checks.ParsePolicy("checks.allow", s)
		if err != nil {
			var fe *switchboard.FieldError
			if !errors.As(err, &fe) || fe.Field != "checks.allow" {
				t.Fatalf("ParsePolicy(%q) = %v, want a FieldError on checks.allow", s, err)
			}
			return
		}
		again, err := checks.ParsePolicy("checks.allow", p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("ParsePolicy(%q).String() = %q reads back as %q, %v", s, p.String(), again.String(), err)
		}
	})
}
