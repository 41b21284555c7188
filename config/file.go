package config

// The switchboard.toml file: its keys laid over the defaults, and errors
// that name the key, its value and the type it wants.

import (
	"fmt"
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
// in from the keys it set. The file is parsed once, into its plain TOML
// values, which the settings check and read: first a section that is not a
// table or a value of the wrong TOML type, then unknown keys, then values
// that do not parse (a duration) are errors, each the first found.
func (c *Config) overlayFile(path string, b []byte, from map[string]string) error {
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
		v, ok := lookup(file, section)
		if !ok {
			continue
		}
		tab, ok := v.(map[string]any)
		if !ok {
			return wrap(&switchboard.FieldError{Field: section, Reason: fmt.Sprintf("is %s; want a table: a [%s] line, then its keys", tomlValue(v), section)})
		}
		for _, s := range settings {
			v, ok := lookup(tab, s.name())
			if s.section() != section || !ok {
				continue
			}
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

// lookup finds a key of a table as the TOML decoder matches a Go struct's
// fields: the key as it is spelled, else a spelling that differs only in
// case (the first in byte order, when there are several).
func lookup(tab map[string]any, key string) (any, bool) {
	if v, ok := tab[key]; ok {
		return v, true
	}
	var match string
	for k := range tab {
		if strings.EqualFold(k, key) && (match == "" || k < match) {
			match = k
		}
	}
	v, ok := tab[match]
	return v, ok && match != ""
}

// known reports whether a key of the file is a section or a setting
// (spelled as lookup matches them).
func known(k toml.Key) bool {
	for _, s := range settings {
		if strings.EqualFold(k[0], s.section()) && (len(k) == 1 || len(k) == 2 && strings.EqualFold(k[1], s.name())) {
			return true
		}
	}
	return false
}
