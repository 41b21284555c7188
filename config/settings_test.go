package config

import (
	"reflect"
	"testing"
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
