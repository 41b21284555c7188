package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every key of the table reaches the reference with a comment of its own,
// its variables, its type and its default, in the file's order.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	secs, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sec := range secs {
		for _, k := range sec.Keys {
			keys = append(keys, k.Key)
			if k.Doc == "" || k.Type == "" || len(k.Env) == 0 {
				t.Errorf("%s: incomplete: %+v", k.Key, k)
			}
			if !strings.HasPrefix(k.Key, sec.Name+".") {
				t.Errorf("%s listed under [%s]", k.Key, sec.Name)
			}
			// The Go names of the fields are replaced by their keys.
			if m := regexp.MustCompile(`(^|[^.\w])(DSN|HeartbeatInterval|TTL|MaxTTL|TLSCert|TLSKey|NATSURL|RequestTimeout)\b`).FindString(k.Doc); m != "" {
				t.Errorf("%s: doc still says the Go name %s: %q", k.Key, m, k.Doc)
			}
		}
	}
	var want []string
	for _, s := range settings {
		want = append(want, s.key)
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %v, want the table's %v", keys, want)
	}
	def := map[string]string{}
	for _, sec := range secs {
		for _, k := range sec.Keys {
			def[k.Key] = k.Default
		}
	}
	for key, v := range map[string]string{"discovery.ttl": `"10s"`, "discovery.max_ttl": `"1h"`, "http.listen": `"127.0.0.1:7400"`,
		"discovery.self_preservation_threshold": "0.5", "http.token": ""} {
		if def[key] != v {
			t.Errorf("default of %s = %q, want %q", key, def[key], v)
		}
	}
}

// A field without a comment gets the comment before it only when that
// comment names it; otherwise the reference refuses the key.
func TestReferenceFieldComments(t *testing.T) {
	dir := t.TempDir()
	src := `package config
// Pair is the [pair] section: two files.
type Pair struct {
	// Cert and Key are PEM files.
	Cert string ` + "`toml:\"cert\"`" + `
	Key  string ` + "`toml:\"key\"`" + `
	// Port is where it listens.
	Port int ` + "`toml:\"port\"`" + `
	Host string ` + "`toml:\"host\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(dir, "pair.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, err := fieldDocs(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := docs["Pair"]
	if got := p.keysFor(p.field("Key")); got != "`cert` and `key` are PEM files." {
		t.Errorf("Key's doc = %q", got)
	}
	if got := p.field("Host"); got != "" {
		t.Errorf("Host took a comment that does not name it: %q", got)
	}
	if got := sectionDoc(p.doc, "Pair", "pair"); got != "The `[pair]` section: two files." {
		t.Errorf("section doc = %q", got)
	}
}

func TestReferencePage(t *testing.T) {
	secs, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteReference(&b, secs, map[string][]string{"discovery.ttl": {"`--ttl` (register)"}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, v := range EnvVars() {
		if !strings.Contains(page, "`"+v.Name+"`") || !strings.Contains(page, "### `"+v.Key+"`") {
			t.Errorf("page lacks %s or its key %s", v.Name, v.Key)
		}
	}
	if !strings.Contains(page, "- flag: `--ttl` (register)") {
		t.Error("page lacks the flag of discovery.ttl")
	}
	for i, line := range strings.Split(page, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("line %d is %d characters: %q", i+1, len([]rune(line)), line)
		}
	}
	// The example file is one the loader takes: every key at its default.
	start := strings.Index(page, "```toml\n") + len("```toml\n")
	end := strings.Index(page[start:], "```")
	path := filepath.Join(t.TempDir(), "switchboard.toml")
	if err := os.WriteFile(path, []byte(page[start:start+end]), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the example file does not load: %v", err)
	}
	c.src = nil
	if d := Default(); c != d {
		t.Errorf("the example file loads as %+v, want the defaults %+v", c, d)
	}
}

// Each kind of value the table holds has its name in the reference.
func TestReferenceTypes(t *testing.T) {
	secs, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range secs {
		for _, k := range sec.Keys {
			for _, s := range settings {
				if s.key != k.Key {
					continue
				}
				want := map[string]string{"*string": "string", "*time.Duration": "duration", "*float64": "number", "*int": "integer", "*bool": "boolean"}[fmt.Sprintf("%T", s.ptr(&Config{}))]
				if want == "" || k.Type != want {
					t.Errorf("%s: type %q, want %q (a new kind of value needs its name in typeName)", k.Key, k.Type, want)
				}
			}
		}
	}
}
