package config

// The switchboard.toml file: its keys laid over the defaults, and errors
// that name the key, its value and the type it wants. A section or key may
// be spelled in another case ([Discovery], TTL), once: two spellings of one
// are an error.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/switchboard-io/switchboard"
)

// tomlValue describes a decoded TOML value for an error: its type, and its
// value when it is short.
func tomlValue(v any) string {
	var kind string
	switch v.(type) {
	case string:
		return fmt.Sprintf("the string %q", truncate(v.(string)))
	case int64:
		kind = "the integer"
	case float64:
		kind = "the number"
	case bool:
		kind = "the boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		kind = "the date/time"
	}
	return kind + " " + truncate(fmt.Sprint(v))
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// overlayFile lays the file's keys (b, read from path) over c, recording
// in from the keys it set; the keys in skip are known but not read. The
// file is parsed once, into its plain TOML values, which the settings check
// and read: first a section or key spelled twice (in different cases), a
// section that is not a table or a value of the wrong TOML type, then
// unknown keys, then values that do not parse (a duration) are errors, each
// the first found.
func (c *Config) overlayFile(path string, b []byte, from map[string]string, skip map[string]bool) error {
	wrap := func(err error) error { return fmt.Errorf("config %s: %w", path, err) }
	var file map[string]any
	md, err := toml.Decode(string(b), &file)
	if err != nil {
		return wrap(err)
	}
	type found struct {
		s setting
		v any
	}
	var values []found
	for _, section := range sections {
		spelt := spellings(file, section)
		switch {
		case len(spelt) == 0:
			continue
		case len(spelt) > 1:
			return wrap(fmt.Errorf("%s are the same section; keep one", and(spelt, "[%s]")))
		}
		v := file[spelt[0]]
		tab, ok := v.(map[string]any)
		if !ok {
			return wrap(&switchboard.FieldError{Field: section, Reason: fmt.Sprintf("is %s; want a table: a [%s] line, then its keys", tomlValue(v), section)})
		}
		for _, s := range settings {
			if s.section() != section || skip[s.key] {
				continue
			}
			names := spellings(tab, s.name())
			switch {
			case len(names) == 0:
				continue
			case len(names) > 1:
				return wrap(fmt.Errorf("%s are the same key of [%s]; keep one", and(names, "%s"), spelt[0]))
			}
			v := tab[names[0]]
			if want := s.want(v); want != "" {
				return wrap(&switchboard.FieldError{Field: s.key, Reason: "is " + tomlValue(v) + "; " + want})
			}
			values = append(values, found{s, v})
		}
	}
	var unknown []string
	for _, k := range md.Keys() {
		if !known(k) {
			unknown = append(unknown, k.String())
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(unknown, ", "))
	}
	for _, x := range values {
		if err := x.s.setFile(c, x.v); err != nil {
			return wrap(err)
		}
		from[x.s.key] = fileOrigin
	}
	return nil
}

// spellings are the keys of a table that are key in any case ("ttl",
// "TTL"), in byte order. The file may spell a key in another case, as the
// TOML decoder matches a Go struct's fields, but only once: two spellings
// are an error rather than one of them silently ignored.
func spellings(tab map[string]any, key string) []string {
	var out []string
	for k := range tab {
		if strings.EqualFold(k, key) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// and lists keys, each formatted with format: "a and b", "a, b and c".
func and(keys []string, format string) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf(format, k)
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}

// known reports whether a key of the file is a section or a setting, in
// any case.
func known(k toml.Key) bool {
	for _, s := range settings {
		if strings.EqualFold(k[0], s.section()) && (len(k) == 1 || len(k) == 2 && strings.EqualFold(k[1], s.name())) {
			return true
		}
	}
	return false
}
