// Package suggest finds the word a user probably meant: the closest of a
// set of known names to one that is not known (a misspelt flag, a misspelt
// connection parameter), for "did you mean …?" in error messages.
package suggest

import "strings"

// Closest returns the name of names closest to word, compared without
// case: one at most maxDist edits away (Distance) and at most a third of
// word's length (two edits turn a four-letter word into another word), or
// one word is a prefix of when word has three bytes or more. Ties go to
// the name first in sort order. It returns "" when no name is close.
func Closest(word string, names []string, maxDist int) string {
	maxDist = min(maxDist, max(1, len(word)/3))
	lw := strings.ToLower(word)
	best, bestDist := "", maxDist+1
	for _, n := range names {
		d := Distance(lw, strings.ToLower(n))
		if d > maxDist && len(word) >= 3 && strings.HasPrefix(strings.ToLower(n), lw) {
			d = maxDist
		}
		if d < bestDist || d == bestDist && n < best {
			best, bestDist = n, d
		}
	}
	if bestDist > maxDist {
		return ""
	}
	return best
}

// Distance is the number of single-byte insertions, deletions,
// substitutions and transpositions of adjacent bytes that turn a into b
// (the optimal string alignment distance): "dns" is one edit from "dsn".
// It takes O(len(a) × len(b)) time and O(len(b)) memory.
func Distance(a, b string) int {
	pprev := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pprev[j-2]+1)
			}
		}
		pprev, prev, cur = prev, cur, pprev
	}
	return prev[len(b)]
}
