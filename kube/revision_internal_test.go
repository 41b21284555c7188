package kube

import (
	"strconv"
	"testing"
)

func TestRevisionOf(t *testing.T) {
	for rv, want := range map[string]int64{
		"1":                   1,
		"123456":              123456,
		"9223372036854775807": 9223372036854775807,
		"9223372036854775808": 0, // past int64
		"":                    0,
		"0":                   0,
		"007":                 0,
		"+5":                  0,
		"-5":                  0,
		" 5":                  0,
		"5 ":                  0,
		"1e3":                 0,
		"abc":                 0,
		"٣":                   0, // a digit, but not an ASCII one
	} {
		if got := revisionOf(rv); got != want {
			t.Errorf("revisionOf(%q) = %d, want %d", rv, got, want)
		}
	}
}

// FuzzRevisionOf: any resourceVersion is a revision or 0, never a panic,
// and a revision is exactly the decimal it was written as.
func FuzzRevisionOf(f *testing.F) {
	for _, s := range []string{"1", "42", "", "0", "-1", "9223372036854775807", "99999999999999999999", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rv string) {
		n := revisionOf(rv)
		if n < 0 {
			t.Fatalf("revisionOf(%q) = %d: negative", rv, n)
		}
		if n != 0 && strconv.FormatInt(n, 10) != rv {
			t.Fatalf("revisionOf(%q) = %d, which is written %q", rv, n, strconv.FormatInt(n, 10))
		}
	})
}
