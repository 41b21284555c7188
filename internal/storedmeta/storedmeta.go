// Package storedmeta reads the metadata of a stored row for the SQL
// backends, which write it as a JSON object of strings: a row another tool
// wrote is read, not refused, and the first such row per catalog handle is
// logged.
package storedmeta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchboard-io/switchboard/internal/jsonfast"
	"github.com/switchboard-io/switchboard/internal/textcut"
)

// Read decodes the metadata of a stored row, which every backend
// writes as a JSON object of strings. A row written by another tool (an
// SQL shell, a migration script) may hold something else; it is read, not
// refused, so that one such row does not fail every List, Get and Watch of
// the catalog: a value that is not a string is read as its JSON text (1 as
// "1", true as "true", {"a": 1} as `{"a":1}`), a null value leaves its key
// out, and a document that is not a JSON object reads as no metadata
// (null, as always, is no metadata too). note is empty for an object of
// strings; otherwise it says what was read differently, for the backend to
// log.
func Read(s string) (md map[string]string, note string) {
	// The fast path, unless a null may be in it: encoding/json, which
	// jsonfast falls back to, reads a null value as "".
	if !strings.Contains(s, "null") {
		if md, err := jsonfast.StringMap(s); err == nil {
			return md, ""
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return map[string]string{}, fmt.Sprintf("metadata %q is not a JSON object: read as no metadata", textcut.Cut(s, 80))
	}
	md = make(map[string]string, len(raw))
	var texts, nulls []string
	for k, v := range raw {
		v = bytes.TrimSpace(v)
		switch {
		case string(v) == "null":
			nulls = append(nulls, k)
		case v[0] == '"':
			var str string
			if err := json.Unmarshal(v, &str); err == nil {
				md[k] = str
				continue
			}
			fallthrough
		default:
			var b bytes.Buffer
			if json.Compact(&b, v) == nil {
				v = b.Bytes()
			}
			md[k] = string(v)
			texts = append(texts, k)
		}
	}
	if len(texts) == 0 && len(nulls) == 0 {
		return md, ""
	}
	var parts []string
	if len(texts) > 0 {
		parts = append(parts, "values that are not strings, read as their JSON text, under "+keyList(texts))
	}
	if len(nulls) > 0 {
		parts = append(parts, "null values, left out, under "+keyList(nulls))
	}
	return md, "metadata holds " + strings.Join(parts, "; and ")
}

// Log is how a backend reads the metadata of its stored rows: as Read
// does, logging through Logger, once per catalog handle,
// the first row whose metadata is not the JSON object of strings the
// backends write (another tool wrote it), or whose other columns a
// backend reads differently than written (Note). A nil *Log, or one
// without a Logger, reads the same and logs nothing.
type Log struct {
	Logger *slog.Logger
	logged atomic.Bool
}

// Decode returns the metadata s of the row of instance id.
func (m *Log) Decode(id, s string) map[string]string {
	md, note := Read(s)
	if note != "" {
		m.Note(id, note)
	}
	return md
}

// Note logs, as Decode logs metadata of another form, that another part
// of the row of instance id was read differently than written (note says
// how): once per handle, metadata notes included.
func (m *Log) Note(id, note string) {
	if m != nil && m.Logger != nil && m.logged.CompareAndSwap(false, true) {
		m.Logger.Warn(fmt.Sprintf("instance %q: %s (written by another tool?); registering the instance again rewrites it. Further rows like it are not logged.", id, note),
			"id", id)
	}
}

// keyList names at most three of keys, sorted and quoted.
func keyList(keys []string) string {
	slices.Sort(keys)
	const show = 3
	q := make([]string, 0, show)
	for _, k := range keys[:min(len(keys), show)] {
		q = append(q, fmt.Sprintf("%q", textcut.Cut(k, 40)))
	}
	s := "key " + q[0]
	if len(keys) > 1 {
		s = "keys " + strings.Join(q, ", ")
	}
	if len(keys) > show {
		s += fmt.Sprintf(" and %d more", len(keys)-show)
	}
	return s
}
