// Package textcut cuts text to a byte budget for error messages and wire
// headers: never inside a UTF-8 sequence (which a %q would show as \xNN
// escapes and a UTF-8 reader as U+FFFD), the cut marked with "…".
//
// All three functions step back from byte n to the start of the character
// found there, over at most utf8.UTFMax-1 continuation bytes: enough for
// any valid UTF-8, so a cut of valid UTF-8 is valid UTF-8. Invalid UTF-8
// is cut the same way; a run of stray continuation bytes at the cut costs
// at most three bytes, not everything before it. They take any n (0 or
// less keeps nothing) and never panic.
package textcut

import "unicode/utf8"

// Marker marks a cut: U+2026, three bytes.
const Marker = "…"

// Prefix returns the longest prefix of s that is at most n bytes long and
// does not end inside a UTF-8 sequence of s (see the package comment for
// invalid UTF-8): s itself when it fits. It adds no marker; the number of
// bytes cut is len(s) - len(Prefix(s, n)).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := n
	for i := 1; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut]
}

// Cut returns s when it is at most n bytes long, otherwise Prefix(s, n)
// followed by Marker: the marker comes on top of the n bytes, so the
// result is at most n+len(Marker) bytes long.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + Marker
}

// Fit returns s when it is at most n bytes long, otherwise a prefix of s
// followed by Marker, the two together at most n bytes long. When n is
// too small to hold the marker (n < len(Marker)) it returns Prefix(s, n),
// unmarked.
func Fit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len(Marker) {
		return Prefix(s, n)
	}
	return Prefix(s, n-len(Marker)) + Marker
}
