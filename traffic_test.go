package switchboard_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

func trafficInstance() switchboard.Instance {
	return switchboard.Instance{Name: "svc", Type: "writer", Address: "10.0.0.7:8080"}
}

func TestNormalizeTraffic(t *testing.T) {
	out, err := switchboard.Normalize(trafficInstance())
	if err != nil {
		t.Fatal(err)
	}
	if out.Weight != switchboard.DefaultWeight || out.Zone != "" || out.Draining || out.Check != nil {
		t.Fatalf("defaults: %+v", out)
	}
	in := trafficInstance()
	in.Weight, in.Zone = switchboard.MaxWeight, "eu-west-1a"
	if out, err = switchboard.Normalize(in); err != nil || out.Weight != switchboard.MaxWeight || out.Zone != "eu-west-1a" {
		t.Fatalf("weight and zone: %+v, %v", out, err)
	}
	for _, tc := range []struct {
		mod          func(*switchboard.Instance)
		field, cause string
	}{
		{func(in *switchboard.Instance) { in.Weight = -1 }, "weight", "from 1 to 10000"},
		{func(in *switchboard.Instance) { in.Weight = switchboard.MaxWeight + 1 }, "weight", "from 1 to 10000"},
		{func(in *switchboard.Instance) { in.Zone = "eu west" }, "zone", "must match"},
		{func(in *switchboard.Instance) { in.Zone = strings.Repeat("z", 64) }, "zone", "must match"},
		{func(in *switchboard.Instance) { in.Health.Status = "sick" }, "health.status", "passing, warning or critical"},
	} {
		in := trafficInstance()
		tc.mod(&in)
		_, err := switchboard.Normalize(in)
		wantFieldErr(t, err, tc.field, tc.cause)
	}
}

func TestNormalizeCheck(t *testing.T) {
	in := trafficInstance()
	in.Check = &switchboard.Check{Target: "http://10.0.0.7:8080/healthz", Interval: 10 * time.Second}
	out, err := switchboard.Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	want := switchboard.Check{Target: in.Check.Target, Interval: 10 * time.Second, Timeout: 5 * time.Second,
		Failures: 3, Successes: 1, DeregisterAfter: 300 * time.Second}
	if *out.Check != want {
		t.Fatalf("defaults: %+v, want %+v", *out.Check, want)
	}
	if in.Check.Timeout != 0 {
		t.Fatal("Normalize modified its input's check")
	}
	in.Check = &switchboard.Check{Target: "tcp://10.0.0.7:5432", Interval: 2 * time.Second}
	if out, err = switchboard.Normalize(in); err != nil || out.Check.Timeout != time.Second {
		t.Fatalf("timeout default is half a short interval: %+v, %v", out.Check, err)
	}
	for _, tc := range []struct {
		c            switchboard.Check
		field, cause string
	}{
		{switchboard.Check{Target: "ftp://h:1", Interval: time.Second * 10}, "check.target", "unknown scheme"},
		{switchboard.Check{Target: "tcp://h", Interval: time.Second * 10}, "check.target", "need a port"},
		{switchboard.Check{Target: "grpc://h", Interval: time.Second * 10}, "check.target", "need a port"},
		{switchboard.Check{Target: "tcp://h:0", Interval: time.Second * 10}, "check.target", "1 to 65535"},
		{switchboard.Check{Target: "tcp://h:1/path", Interval: time.Second * 10}, "check.target", "host:port only"},
		{switchboard.Check{Target: "http://u:p@h:1/", Interval: time.Second * 10}, "check.target", "credentials"},
		{switchboard.Check{Target: "http:///x", Interval: time.Second * 10}, "check.target", "missing host"},
		{switchboard.Check{Target: "", Interval: time.Second * 10}, "check.target", "must not be empty"},
		{switchboard.Check{Target: "tcp://h:1", Interval: 0}, "check.interval", "from 1s to 1h0m0s"},
		{switchboard.Check{Target: "tcp://h:1", Interval: 2 * time.Hour}, "check.interval", "from 1s to 1h0m0s"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, Timeout: 10 * time.Second}, "check.timeout", "under the interval"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, Timeout: -1}, "check.timeout", "negative"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, Failures: -1}, "check.failures", "from 1 to 100"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, Successes: 101}, "check.successes", "from 1 to 100"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, Body: "ok"}, "check.body", "http and https"},
		{switchboard.Check{Target: "tcp://h:1", Interval: time.Second * 10, DeregisterAfter: time.Second}, "check.deregister_after", "at least the interval"},
	} {
		in := trafficInstance()
		c := tc.c
		in.Check = &c
		_, err := switchboard.Normalize(in)
		wantFieldErr(t, err, tc.field, tc.cause)
	}
}

func TestParseCheckTarget(t *testing.T) {
	for s, want := range map[string]switchboard.CheckTarget{
		"http://db.internal/healthz?full=1": {Kind: switchboard.CheckHTTP, Host: "db.internal", Port: "80", Path: "/healthz?full=1"},
		"HTTPS://[::1]:8443":                {Kind: switchboard.CheckHTTPS, Host: "::1", Port: "8443", Path: "/"},
		"tcp://10.0.0.1:5432":               {Kind: switchboard.CheckTCP, Host: "10.0.0.1", Port: "5432"},
		"grpc://127.0.0.1:50051/echo.Echo":  {Kind: switchboard.CheckGRPC, Host: "127.0.0.1", Port: "50051", Path: "echo.Echo"},
		"grpc://127.0.0.1:50051":            {Kind: switchboard.CheckGRPC, Host: "127.0.0.1", Port: "50051"},
	} {
		got, err := switchboard.ParseCheckTarget(s)
		if err != nil || got != want {
			t.Errorf("ParseCheckTarget(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	if got, _ := switchboard.ParseCheckTarget("HTTPS://[::1]:8443"); got.Address() != "[::1]:8443" {
		t.Errorf("Address = %q", got.Address())
	}
}

func FuzzParseCheckTarget(f *testing.F) {
	for _, s := range []string{"http://h/x", "https://[::1]:1/", "tcp://h:1", "grpc://h:1/s", "tcp://h:", "http://%zz", "grpc://h:1/a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ct, err := switchboard.ParseCheckTarget(s)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", s, err)
			}
			return
		}
		if ct.Host == "" || ct.Port == "" {
			t.Fatalf("%q parsed without host or port: %+v", s, ct)
		}
		if _, _, err := switchboard.SplitHostPort(ct.Address()); err != nil {
			t.Fatalf("%q: address %q not host:port: %v", s, ct.Address(), err)
		}
	})
}

func TestServingAndStatus(t *testing.T) {
	for _, tc := range []struct {
		in      switchboard.Instance
		serving bool
		status  switchboard.Status
	}{
		{switchboard.Instance{}, true, switchboard.StatusPassing},
		{switchboard.Instance{Stale: true}, false, switchboard.StatusPassing},
		{switchboard.Instance{Draining: true}, false, switchboard.StatusDraining},
		{switchboard.Instance{Health: switchboard.Health{Status: switchboard.StatusWarning}}, true, switchboard.StatusWarning},
		{switchboard.Instance{Health: switchboard.Health{Status: switchboard.StatusCritical}}, false, switchboard.StatusCritical},
		{switchboard.Instance{Draining: true, Health: switchboard.Health{Status: switchboard.StatusCritical}}, false, switchboard.StatusDraining},
	} {
		if got := tc.in.Serving(); got != tc.serving {
			t.Errorf("%+v: Serving = %v", tc.in, got)
		}
		if got := tc.in.Status(); got != tc.status {
			t.Errorf("%+v: Status = %v, want %v", tc.in, got, tc.status)
		}
	}
}

// TestQuerySelects: what List and Watch of a query hold, and why an
// instance that stops being selected leaves.
func TestQuerySelects(t *testing.T) {
	live := switchboard.Instance{Name: "a", Type: "writer"}
	critical := live
	critical.Health.Status = switchboard.StatusCritical
	drained := live
	drained.Draining = true
	for _, tc := range []struct {
		q     switchboard.Query
		in    switchboard.Instance
		stale bool
		want  bool
	}{
		{switchboard.Query{}, live, false, true},
		{switchboard.Query{}, live, true, false},
		{switchboard.Query{}, critical, false, false},
		{switchboard.Query{}, drained, false, true},
		{switchboard.Query{All: true}, critical, true, true},
		{switchboard.Query{Name: "b"}, live, false, false},
		{switchboard.Query{Name: "b", All: true}, live, false, false},
	} {
		if got := tc.q.Selects(&tc.in, tc.stale); got != tc.want {
			t.Errorf("%+v selects %+v (stale %v) = %v", tc.q, tc.in, tc.stale, got)
		}
	}
	for _, tc := range []struct {
		in    *switchboard.Instance
		stale bool
		want  switchboard.Reason
	}{
		{&live, true, switchboard.ReasonExpired},
		{&critical, true, switchboard.ReasonExpired},
		{&critical, false, switchboard.ReasonCheckFailed},
		{&live, false, switchboard.ReasonDeregistered},
		{nil, false, switchboard.ReasonDeregistered},
	} {
		if got := switchboard.RemovalReason(tc.in, tc.stale); got != tc.want {
			t.Errorf("RemovalReason(%+v, %v) = %s, want %s", tc.in, tc.stale, got, tc.want)
		}
	}
}
