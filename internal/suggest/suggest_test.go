package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"capabilty", "capability", 1},
		{"dns", "dsn", 1}, {"ab", "ba", 1}, {"abc", "ca", 3}, {"kitten", "sitting", 3}, {"same", "same", 0},
		{"sslmod", "sslmode", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"capability", "name", "dsn", "older-than", "sslmode", "search_path"}
	for _, tc := range []struct{ word, want string }{
		{"capabilty", "capability"},
		{"Capability", "capability"},
		{"dns", "dsn"},
		{"nope", ""}, // two edits from "name": another word
		{"older", "older-than"},
		{"sslmod", "sslmode"},
		{"ssl_mode", "sslmode"},
		{"zzzzzzzz", ""},
		{"", ""},
	} {
		if got := Closest(tc.word, names, 2); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func FuzzDistance(f *testing.F) {
	f.Add("capabilty", "capability")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 200 || len(b) > 200 {
			return
		}
		d := Distance(a, b)
		if d < 0 || d > max(len(a), len(b)) || (d == 0) != (a == b) || d != Distance(b, a) {
			t.Fatalf("Distance(%q, %q) = %d", a, b, d)
		}
	})
}
