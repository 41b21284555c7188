package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// settings is the one list of the keys: every field of the file's sections
// has its row there (so the environment variable, the file's type check and
// NameSource all know it), and each row sets the field its key names.
func TestSettingsCoverEveryField(t *testing.T) {
	rows := map[string]setting{}
	for _, s := range settings {
		if _, dup := rows[s.key]; dup {
			t.Errorf("%s: two rows", s.key)
		}
		rows[s.key] = s
	}
	var c Config
	cv := reflect.ValueOf(&c).Elem()
	n := 0
	for i := range cv.NumField() {
		section := cv.Type().Field(i).Tag.Get("toml")
		if section == "" {
			continue // not in the file (src)
		}
		sv := cv.Field(i)
		for j := range sv.NumField() {
			key := section + "." + sv.Type().Field(j).Tag.Get("toml")
			n++
			s, ok := rows[key]
			if !ok {
				t.Errorf("%s: no row in settings", key)
				continue
			}
			if got, want := reflect.ValueOf(s.ptr(&c)).Pointer(), sv.Field(j).Addr().Pointer(); got != want {
				t.Errorf("%s: its row sets another field", key)
			}
		}
	}
	if n != len(settings) {
		t.Errorf("%d fields, %d rows in settings", n, len(settings))
	}
}

// EnvVars lists exactly the variables Load reads, in the order it reads
// them, each with the key it sets: with every other key unused, a value in
// the variable either loads, recorded as from the variable, or is an error
// that names the variable.
func TestEnvVarsAreWhatLoadReads(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.toml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var read []string
	if _, err := Load(empty, func(k string) string { read = append(read, k); return "" }); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range EnvVars() {
		listed = append(listed, v.Name)
	}
	if !slices.Equal(listed, read) {
		t.Fatalf("EnvVars lists %v; Load reads %v", listed, read)
	}
	for _, v := range EnvVars() {
		var others []string
		for _, s := range settings {
			if s.key != v.Key {
				others = append(others, s.key)
			}
		}
		// A value of the key's type: a number its default.
		d := Default()
		var value string
		switch s := settingOf(t, v.Key); s.ptr(&d).(type) {
		case *string:
			value = "x"
		case *time.Duration:
			value = "1m"
		default:
			value = fmt.Sprint(s.value(&d))
		}
		c, err := LoadExcept(others, empty, func(k string) string {
			if k == v.Name {
				return value
			}
			return ""
		})
		var fe *switchboard.FieldError
		switch {
		case err == nil && c.src.from[v.Key] != v.Name:
			t.Errorf("%s=%q: %s came from %q, want the variable", v.Name, value, v.Key, c.src.from[v.Key])
		case err != nil && !(errors.As(err, &fe) && fe.Field == v.Name):
			t.Errorf("%s=%q: %v, want an error naming the variable", v.Name, value, err)
		}
	}
}

// settingOf is the row of key.
func settingOf(t *testing.T, key string) setting {
	t.Helper()
	i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key })
	if i < 0 {
		t.Fatalf("%s: no row in settings", key)
	}
	return settings[i]
}
