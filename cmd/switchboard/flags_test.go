package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// configKeys lists the keys of config.Config ("discovery.ttl"), from its
// toml tags, with each key's value in c.
func configKeys(c config.Config) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		sec := v.Type().Field(i)
		if !sec.IsExported() {
			continue
		}
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			out[sec.Tag.Get("toml")+"."+f.Tag.Get("toml")] = fmt.Sprint(v.Field(i).Field(j).Interface())
		}
	}
	return out
}

// changedKeys are the keys whose values differ between a and b.
func changedKeys(a, b config.Config) []string {
	ka, kb := configKeys(a), configKeys(b)
	var out []string
	for k, v := range ka {
		if kb[k] != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// fieldOfKey is the validation field config.Validate uses for a key: the
// keys of [discovery] without their section.
func fieldOfKey(key string) string { return strings.TrimPrefix(key, "discovery.") }

// flagRunArgs are the arguments with which each command gets as far as
// loading the configuration; commands not listed need none.
func flagRunArgs(t *testing.T) map[string][]string {
	return map[string][]string{
		"register":   {"--name", "n", "--type", "t", "--address", "127.0.0.1:1"},
		"echo":       {"--name", "n"},
		"send":       {"--to", "f.m.n:in"},
		"deregister": {"3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11"},
		"drain":      {"3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11"},
		"backup":     {filepath.Join(t.TempDir(), "copy.db")},
	}
}

// noConfigCommands never load the configuration.
var noConfigCommands = []string{"version", "help", "completion", "completion bash", "completion fish", "completion powershell", "completion zsh"}

// flagValues are tried in turn as a flag's value until the command gets as
// far as loading the configuration with it.
var flagValues = []string{"1s", "2", "127.0.0.1:1"}

// TestConfigFlagsBound runs every command with each of its flags, one at a
// time, up to the loading of the configuration, and finds the keys the
// flag sets: every flag that sets a key is bound to it (bindKey), so that
// an error about the key names the flag, and every binding is real. Also,
// no flag is named for an error about a key it does not set (serve's
// --tls-cert is [http] tls_cert, echo's is [transport] tls_cert).
func TestConfigFlagsBound(t *testing.T) {
	t.Chdir(t.TempDir()) // no switchboard.toml
	clearConfigEnv(t)
	type result struct {
		loaded  bool
		changed []string
	}
	var got result
	stop := errors.New("stop: the configuration is loaded")
	var fail error // what loaded returns; stop when nil
	loaded := func(before, after config.Config) error {
		got = result{loaded: true, changed: changedKeys(before, after)}
		if fail != nil {
			return fail
		}
		return stop
	}
	exec := func(args ...string) (result, string) {
		got = result{}
		_, _, stderr := cliWith(t, func(g *globals) { g.configLoaded = loaded }, args...)
		return got, stderr
	}
	base := flagRunArgs(t)
	root := newRoot(io.Discard, io.Discard)
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				cmds = append(cmds, sub)
				walk(sub)
			}
		}
	}
	walk(root)
	allKeys := slices.Sorted(func(yield func(string) bool) {
		for k := range configKeys(config.Default()) {
			if !yield(k) {
				return
			}
		}
	})
	bound := 0
	for _, c := range cmds {
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), "switchboard "))
		name := strings.Join(path, " ")
		args := append(slices.Clone(path), base[name]...)
		b, stderr := exec(args...)
		if slices.Contains(noConfigCommands, name) {
			if b.loaded {
				t.Errorf("%s loads the configuration: take it off noConfigCommands", name)
			}
			continue
		}
		if !b.loaded {
			t.Errorf("%s: %v does not get as far as loading the configuration (stderr %q): give it arguments in flagRunArgs, or list it in noConfigCommands", name, args, stderr)
			continue
		}
		var flags []*pflag.Flag
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
		for _, f := range flags {
			if f.Name == "help" {
				continue
			}
			var sets []string
			values := flagValues
			if f.Value.Type() == "bool" {
				// The value that is not the default (--checks is on
				// unless turned off).
				values = []string{"true"}
				if f.DefValue == "true" {
					values = []string{"false"}
				}
			}
			value := values[0] // the first value the flag takes
			for _, v := range values {
				r, _ := exec(append(slices.Clone(args), "--"+f.Name+"="+v)...)
				if r.loaded {
					value = v
					for _, k := range r.changed {
						if !slices.Contains(b.changed, k) {
							sets = append(sets, k)
						}
					}
					break
				}
			}
			var want []string
			if k, ok := f.Annotations[annKey]; ok {
				want = k
				bound++
			}
			if !slices.Equal(sets, want) {
				t.Errorf("%s --%s sets the configuration's %v but is bound (bindKey) to %v", name, f.Name, sets, want)
				continue
			}
			for _, k := range sets {
				// The real path: config.Load leaves the field of a key a
				// flag changed for nameSource to name.
				fail = &switchboard.FieldError{Field: fieldOfKey(k), Value: "v", Reason: "wrong"}
				_, stderr := exec(append(slices.Clone(args), "--"+f.Name+"="+value)...)
				fail = nil
				if w := fmt.Sprintf("switchboard: --%s \"v\": wrong; run 'switchboard %s --help'\n", f.Name, name); stderr != w {
					t.Errorf("%s --%s: an error about %s reads %q; want %q", name, f.Name, k, stderr, w)
				}
			}
			// No other key's error names the flag.
			if len(sets) == 0 {
				continue
			}
			g := &globals{}
			r, _ := newRootGlobals(io.Discard, io.Discard)
			sub, _, err := r.Find(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.ParseFlags([]string{"--" + f.Name + "=" + value}); err != nil {
				t.Fatal(err)
			}
			g.cmd = sub
			for _, k := range allKeys {
				if slices.Contains(sets, k) {
					continue
				}
				err := g.nameSource(config.Config{}, &switchboard.FieldError{Field: fieldOfKey(k), Value: "v", Reason: "wrong"})
				if strings.HasPrefix(err.Error(), "--"+f.Name+" ") {
					t.Errorf("%s --%s: an error about %s, which it does not set, names it: %v", name, f.Name, k, err)
				}
			}
		}
	}
	if bound == 0 {
		t.Fatal("no flag is bound to a key: the walk found nothing")
	}
}

// TestTLSFlagsNamed: an error about a TLS flag's value names the flag the
// user typed, not the key it sets (serve's --tls-* are [http], echo's and
// send's [transport]); one set in the environment names the variable.
func TestTLSFlagsNamed(t *testing.T) {
	t.Chdir(t.TempDir())
	clearConfigEnv(t)
	dsn, _ := dsnIn(t)
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"serve", "--dsn", dsn, "--tls-cert", "c.pem"}, `switchboard: --tls-cert "c.pem": http.tls_key is not set`},
		{"", []string{"serve", "--dsn", dsn, "--tls-key", "k.pem"}, `switchboard: --tls-key "k.pem": http.tls_cert is not set`},
		{"", []string{"echo", "--dsn", dsn, "--name", "e", "--tls-cert", "c.pem"}, `switchboard: --tls-cert "c.pem": transport.tls_key is not set`},
		{"", []string{"echo", "--dsn", dsn, "--name", "e", "--tls-key", "k.pem"}, `switchboard: --tls-key "k.pem": transport.tls_cert is not set`},
		{"", []string{"send", "--dsn", dsn, "--to", "f.m.n:in", "--tls-cert", "c.pem"}, `switchboard: --tls-cert "c.pem": transport.tls_key is not set`},
		{"", []string{"send", "--dsn", dsn, "--to", "f.m.n:in", "--tls-key", "k.pem"}, `switchboard: --tls-key "k.pem": transport.tls_cert is not set`},
		// serve's --tls-cert is not the module wire's: a [transport]
		// error names its own source.
		{"SWITCHBOARD_TRANSPORT_TLS_KEY", []string{"serve", "--dsn", dsn, "--tls-cert", "c.pem", "--tls-key", "k.pem"}, `switchboard: SWITCHBOARD_TRANSPORT_TLS_KEY "k2.pem": transport.tls_cert is not set`},
		{"SWITCHBOARD_HTTP_TLS_KEY", []string{"echo", "--dsn", dsn, "--name", "e", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, `switchboard: SWITCHBOARD_HTTP_TLS_KEY "k2.pem": http.tls_cert is not set`},
	} {
		t.Run(strings.Join(tc.args[:1], " "), func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, "k2.pem")
			}
			code, _, stderr := cli(t, tc.args...)
			if code != 2 || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("%s %v: exit %d stderr %q; want exit 2 and %q…", tc.env, tc.args, code, stderr, tc.want)
			}
		})
	}
}

// TestEchoCAWithoutCertificate: echo with a CA but no certificate of its
// own names the CA as it was set.
func TestEchoCAWithoutCertificate(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	clearConfigEnv(t)
	dsn, _ := dsnIn(t)
	caFile := testkit.WriteFile(t, dir, "ca.pem", testkit.NewCA(t, "echo CA test").PEM)
	code, _, stderr := cli(t, "echo", "--dsn", dsn, "--name", "e", "--tls-ca", caFile)
	if want := fmt.Sprintf("switchboard: --tls-ca %q: a TLS server needs its certificate too", caFile); code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("--tls-ca alone: exit %d stderr %q; want exit 2 and %q…", code, stderr, want)
	}
	t.Setenv("SWITCHBOARD_TRANSPORT_TLS_CA", caFile)
	code, _, stderr = cli(t, "echo", "--dsn", dsn, "--name", "e")
	if want := fmt.Sprintf("switchboard: SWITCHBOARD_TRANSPORT_TLS_CA %q: a TLS server needs its certificate too", caFile); code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("SWITCHBOARD_TRANSPORT_TLS_CA alone: exit %d stderr %q; want exit 2 and %q…", code, stderr, want)
	}
}
