package config

// The reference of the keys: docs/configuration.md is written from the
// settings table, the defaults and the doc comments of the fields the keys
// set, so a key added to the table reaches the page with its variable, type
// and default, and cannot reach it undocumented. The page also names the
// command-line flags that set each key, which only the CLI knows: its
// generator (cmd/switchboard, `go generate ./...`) passes them in.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KeyRef describes one key of the file for the reference page.
type KeyRef struct {
	Key     string   // discovery.ttl
	Env     []string // the variables that set it, the one that wins last
	Type    string   // string, duration, number, integer or boolean
	Default string   // as the file would hold it: "10s", 0.5; "" when empty
	Doc     string   // the doc comment of the field the key sets, its Go names replaced by the keys
}

// SectionRef describes one table of the file.
type SectionRef struct {
	Name string // discovery
	Doc  string // the doc comment of its type
	Keys []KeyRef
}

// Reference returns the file's sections and keys in the file's order, each
// key documented by the doc comment of the Config field it sets, read from
// the package's Go source in srcDir (comments do not reach a binary, so the
// generator and its test run in the source tree). A key whose field has no
// comment, and no comment before it that names it (as "TLSCert and TLSKey
// are …" names TLSKey), is an error naming the key.
func Reference(srcDir string) ([]SectionRef, error) {
	docs, err := fieldDocs(srcDir)
	if err != nil {
		return nil, err
	}
	var out []SectionRef
	def := Default()
	for _, s := range settings {
		typ, field := fieldOf(s)
		if typ == "" {
			return nil, fmt.Errorf("config reference: %s sets no field of Config", s.key)
		}
		st := docs[typ]
		if st == nil {
			return nil, fmt.Errorf("config reference: no source for type %s (of %s) in %s", typ, s.key, srcDir)
		}
		text := st.field(field)
		if text == "" {
			return nil, fmt.Errorf("config reference: %s (field %s.%s) has no doc comment; say what it does there", s.key, typ, field)
		}
		if len(out) == 0 || out[len(out)-1].Name != s.section() {
			out = append(out, SectionRef{Name: s.section(), Doc: st.keysFor(sectionDoc(st.doc, typ, s.section()))})
		}
		sec := &out[len(out)-1]
		sec.Keys = append(sec.Keys, KeyRef{
			Key:     s.key,
			Env:     s.vars(),
			Type:    typeName(s.ptr(&def)),
			Default: formatValue(s.value(&def)),
			Doc:     st.keysFor(text),
		})
	}
	return out, nil
}

// fieldOf is the name of the struct type holding the field s sets, and the
// field's name: ("Discovery", "TTL") for discovery.ttl.
func fieldOf(s setting) (typ, field string) {
	var c Config
	want := reflect.ValueOf(s.ptr(&c)).Pointer()
	cv := reflect.ValueOf(&c).Elem()
	for i := range cv.NumField() {
		sec := cv.Field(i)
		if sec.Kind() != reflect.Struct {
			continue
		}
		for j := range sec.NumField() {
			if sec.Field(j).Addr().Pointer() == want {
				return sec.Type().Name(), sec.Type().Field(j).Name
			}
		}
	}
	return "", ""
}

// structDoc is what the source says about one struct type.
type structDoc struct {
	doc    string
	fields []fieldDoc // in source order
}

type fieldDoc struct {
	name, key, doc string // key: the field's toml name
}

// field is the doc of the named field: its own comment, else the nearest
// comment before it that names it.
func (s *structDoc) field(name string) string {
	i := slices.IndexFunc(s.fields, func(f fieldDoc) bool { return f.name == name })
	if i < 0 {
		return ""
	}
	if s.fields[i].doc != "" {
		return s.fields[i].doc
	}
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	for j := i - 1; j >= 0; j-- {
		if d := s.fields[j].doc; d != "" {
			if word.MatchString(d) {
				return d
			}
			return ""
		}
	}
	return ""
}

// keysFor replaces the Go names of the struct's fields in text by their
// keys, as a reader of the file knows them: "TTL is …" → "`ttl` is …".
func (s *structDoc) keysFor(text string) string {
	for _, f := range s.fields {
		if f.key == "" {
			continue
		}
		// Not after a dot: remote.Config.RequestTimeout is another type's.
		text = regexp.MustCompile(`(^|[^.\w])`+regexp.QuoteMeta(f.name)+`\b`).ReplaceAllString(text, "${1}`"+f.key+"`")
	}
	return text
}

var sectionLead = regexp.MustCompile(`^\w+ is the (\[\w+\]) section`)

// sectionDoc is a section type's comment as the page says it: "HTTP is the
// [http] section: …" → "The `[http]` section: …".
func sectionDoc(text, typ, name string) string {
	if m := sectionLead.FindStringIndex(text); m != nil && strings.HasPrefix(text, typ+" ") {
		return "The `[" + name + "]` section" + text[m[1]:]
	}
	return text
}

// fieldDocs reads the struct types of the package's non-test Go files in
// dir: their doc comments and their fields'.
func fieldDocs(dir string) (map[string]*structDoc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]*structDoc{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("config reference: %w", err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("config reference: %w", err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				d := &structDoc{doc: plain(ts.Doc)}
				if d.doc == "" && len(gd.Specs) == 1 {
					d.doc = plain(gd.Doc)
				}
				for _, fl := range st.Fields.List {
					key := ""
					if fl.Tag != nil {
						tag, _ := strconv.Unquote(fl.Tag.Value)
						key, _, _ = strings.Cut(reflect.StructTag(tag).Get("toml"), ",")
					}
					for _, n := range fl.Names {
						d.fields = append(d.fields, fieldDoc{name: n.Name, key: key, doc: plain(fl.Doc)})
					}
				}
				out[ts.Name.Name] = d
			}
		}
	}
	return out, nil
}

// plain is a comment group as one paragraph of text.
func plain(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// typeName says what a value of the field p points to is in the file.
func typeName(p any) string {
	switch p.(type) {
	case *time.Duration:
		return "duration"
	case *float64:
		return "number"
	case *int:
		return "integer"
	case *bool:
		return "boolean"
	}
	return "string"
}

// formatValue is v as the file would hold it.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return ""
		}
		return strconv.Quote(v)
	case time.Duration:
		return strconv.Quote(shortDuration(v))
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// shortDuration is d without the zero units time.Duration.String keeps:
// "1h", not "1h0m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// WriteReference writes the Markdown reference page of secs (Reference's
// result). flags maps a key to the command-line flags that set it, each
// with the commands that take it ("--ttl (register, demo)").
func WriteReference(w io.Writer, secs []SectionRef, flags map[string][]string) error {
	var b strings.Builder
	b.WriteString(referenceIntro)
	b.WriteString("\n## Example file: every key at its default\n\n```toml\n")
	for i, sec := range secs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n", sec.Name)
		for _, k := range sec.Keys {
			_, name, _ := strings.Cut(k.Key, ".")
			v := k.Default
			if v == "" {
				v = `""`
			}
			fmt.Fprintf(&b, "%s = %s\n", name, v)
		}
	}
	b.WriteString("```\n")
	b.WriteString("\n")
	for _, sec := range secs {
		fmt.Fprintf(&b, "## [%s]\n\n", sec.Name)
		if sec.Doc != "" {
			b.WriteString(wrap(sec.Doc) + "\n\n")
		}
		for _, k := range sec.Keys {
			fmt.Fprintf(&b, "### `%s`\n\n", k.Key)
			b.WriteString(wrap(k.Doc) + "\n\n")
			def := "empty"
			if k.Default != "" {
				def = "`" + k.Default + "`"
			}
			fmt.Fprintf(&b, "- type: %s; default: %s\n", k.Type, def)
			env := make([]string, len(k.Env))
			for i, e := range k.Env {
				env[i] = "`" + e + "`"
			}
			if len(env) > 1 {
				fmt.Fprintf(&b, "- environment: %s (the second wins)\n", strings.Join(env, ", "))
			} else {
				fmt.Fprintf(&b, "- environment: %s\n", env[0])
			}
			if fl := flags[k.Key]; len(fl) > 0 {
				fmt.Fprintf(&b, "- flag: %s\n", strings.Join(fl, "; "))
			} else {
				b.WriteString("- flag: none\n")
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// wrap cuts text into lines of at most 100 characters, as the guides are.
func wrap(text string) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(w) > 100:
			b.WriteString("\n")
			n = 0
		default:
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

const referenceIntro = `# Configuration reference

<!-- Generated by ` + "`go generate ./cmd/switchboard`" + ` from the config package; do not edit. -->

Every setting of Switchboard: its key in ` + "`switchboard.toml`" + `, the environment variable that
sets it, the command-line flags that set it, its type and its default. Each value comes from, in
order, the default, the file (` + "`switchboard.toml`" + ` in the working directory, or ` + "`--config FILE`" + `),
the environment, and the flags: the last one set wins. Durations are written in quotes with a
unit (` + "`\"250ms\"`, `\"10s\"`, `\"1h\"`" + `).

Unknown keys, a value of the wrong type and a value out of range are errors that name where the
value came from: the variable, the file and key, the flag, or the key marked ` + "`(default)`" + ` when
a default does not fit with what was set. A key or section written in another case (` + "`TTL`" + `,
` + "`[Discovery]`" + `) is read like the others, but only once: both spellings in one file is an error.
See [the guides](README.md) for what the settings are for.
`
