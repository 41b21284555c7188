// Package jsonfast decodes the two small JSON shapes the SQL backends store
// per row, a list of strings (capabilities) and an object of strings
// (metadata), without encoding/json's reflection: reading a large catalog
// spends most of its decoding time there. Anything but the plain form
// (an escape sequence, unexpected whitespace, another type) is left to
// encoding/json, so the result is always what encoding/json would give.
// String and Space serve hand decoders of larger shapes (the SQLite
// backend's packed rows) on the same terms.
package jsonfast

import (
	"encoding/json"
	"errors"
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

// String reads the JSON string that starts at s[i] and returns it and the
// index after its closing quote. A plain one (see str) is a substring of s;
// any other (escapes, invalid UTF-8, control characters) is decoded, or
// refused, by encoding/json.
func String(s string, i int) (string, int, error) {
	if v, j, ok := str(s, i); ok {
		return v, j, nil
	}
	if i >= len(s) || s[i] != '"' {
		return "", 0, errNotString
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			var v string
			if err := json.Unmarshal([]byte(s[i:j+1]), &v); err != nil {
				return "", 0, err
			}
			return v, j + 1, nil
		}
	}
	return "", 0, errNotString
}

var errNotString = errors.New("jsonfast: not a JSON string")

// Space returns the index after the white space JSON allows between tokens
// at s[i:].
func Space(s string, i int) int { return skip(s, i) }

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
	i, n, empty, ok := open(s, '[', ']')
	if !ok {
		return nil, false
	}
	if empty {
		return []string{}, true
	}
	out := make([]string, 0, n)
	for {
		v, j, ok := str(s, i)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		var end bool
		if i, end, ok = next(s, j, ']'); !ok {
			return nil, false
		} else if end {
			return out, true
		}
	}
}

func stringMap(s string) (map[string]string, bool) {
	i, n, empty, ok := open(s, '{', '}')
	if !ok {
		return nil, false
	}
	if empty {
		return map[string]string{}, true
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
		var end bool
		if i, end, ok = next(s, j, '}'); !ok {
			return nil, false
		} else if end {
			return out, true
		}
	}
}

// open reads the opening bracket of a list or object that must make up all
// of s: it returns the index of its first element, an upper bound of the
// element count (one more than the commas), and whether it is empty (its
// closing bracket follows, and nothing but white space after it).
func open(s string, opening, closing byte) (i, n int, empty, ok bool) {
	i = skip(s, 0)
	if i >= len(s) || s[i] != opening {
		return 0, 0, false, false
	}
	i = skip(s, i+1)
	if i < len(s) && s[i] == closing {
		return 0, 0, true, skip(s, i+1) == len(s)
	}
	n = 1
	for j := i; j < len(s); j++ {
		if s[j] == ',' {
			n++
		}
	}
	return i, n, false, true
}

// next reads what follows an element at s[j:]: a comma (the next element's
// index) or the closing bracket, which must end s but for white space.
func next(s string, j int, closing byte) (i int, end, ok bool) {
	i = skip(s, j)
	if i >= len(s) {
		return 0, false, false
	}
	switch s[i] {
	case ',':
		return skip(s, i+1), false, true
	case closing:
		return 0, true, skip(s, i+1) == len(s)
	}
	return 0, false, false
}
