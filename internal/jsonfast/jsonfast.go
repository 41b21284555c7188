// Package jsonfast decodes the two small JSON shapes the SQL backends store
// per row, a list of strings (capabilities) and an object of strings
// (metadata), without encoding/json's reflection: reading a large catalog
// spends most of its decoding time there. Anything but the plain form
// (an escape sequence, unexpected whitespace, another type) is left to
// encoding/json, so the result is always what encoding/json would give.
package jsonfast

import (
	"encoding/json"
	"unicode/utf8"
)

// Strings decodes a JSON array of strings; nil and empty arrays give an
// empty, non-nil slice.
func Strings(s string) ([]string, error) {
	if out, ok := strings(s); ok {
		return out, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// StringMap decodes a JSON object of strings; null and {} give an empty,
// non-nil map.
func StringMap(s string) (map[string]string, error) {
	if out, ok := stringMap(s); ok {
		return out, nil
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// str reads a plain string (valid UTF-8, no escapes, no control characters) starting
// at s[i] == '"'; it returns the string and the index after its closing
// quote.
func str(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	high := false
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[i+1 : j]
			if high && !utf8.ValidString(v) {
				return "", 0, false // encoding/json replaces invalid bytes
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return "", 0, false
}

// skip passes the whitespace JSON allows between tokens.
func skip(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
		i++
	}
	return i
}

func strings(s string) ([]string, bool) {
	i := skip(s, 0)
	if i >= len(s) || s[i] != '[' {
		return nil, false
	}
	i = skip(s, i+1)
	if i < len(s) && s[i] == ']' {
		return []string{}, skip(s, i+1) == len(s)
	}
	n := 1
	for j := i; j < len(s); j++ {
		if s[j] == ',' {
			n++
		}
	}
	out := make([]string, 0, n)
	for {
		v, j, ok := str(s, i)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		i = skip(s, j)
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skip(s, i+1)
		case ']':
			return out, skip(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}

func stringMap(s string) (map[string]string, bool) {
	i := skip(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	i = skip(s, i+1)
	if i < len(s) && s[i] == '}' {
		return map[string]string{}, skip(s, i+1) == len(s)
	}
	n := 1
	for j := i; j < len(s); j++ {
		if s[j] == ',' {
			n++
		}
	}
	out := make(map[string]string, n)
	for {
		k, j, ok := str(s, i)
		if !ok {
			return nil, false
		}
		i = skip(s, j)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		v, j, ok := str(s, skip(s, i+1))
		if !ok {
			return nil, false
		}
		out[k] = v // a repeated key: the last wins, as in encoding/json
		i = skip(s, j)
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case ',':
			i = skip(s, i+1)
		case '}':
			return out, skip(s, i+1) == len(s)
		default:
			return nil, false
		}
	}
}
