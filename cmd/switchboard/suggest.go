package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError is the error of a flag cobra could not parse: an unknown long
// flag gets a suggestion when one of the command's flags is close, as an
// unknown command does ("unknown flag: --capabilty (did you mean
// --capability?)").
func flagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return usage(err)
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(msg, prefix), "=")
	if s := suggestFlag(cmd, name); s != "" {
		return usage(fmt.Errorf("%s (did you mean --%s?)", msg, s))
	}
	return usage(errors.New(msg))
}

// suggestFlag is the flag of cmd (its own and those it inherits) closest to
// name within cmd's suggestion distance (two edits by default, and at most
// a third of name's length), or one name is a prefix of; "" when none is close. Hidden flags are never
// suggested.
func suggestFlag(cmd *cobra.Command, name string) string {
	maxDist := cmd.SuggestionsMinimumDistance
	if r := cmd.Root(); maxDist <= 0 && r != nil {
		maxDist = r.SuggestionsMinimumDistance
	}
	if maxDist <= 0 {
		maxDist = 2
	}
	// Two edits of a four-letter name is another word (--nope is not
	// --name): a third of the name's length at most, one at least.
	maxDist = min(maxDist, max(1, len(name)/3))
	best, bestDist := "", maxDist+1
	consider := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(f.Name))
		if d > maxDist && len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = maxDist
		}
		if d < bestDist || d == bestDist && f.Name < best {
			best, bestDist = f.Name, d
		}
	}
	cmd.LocalFlags().VisitAll(consider)
	cmd.InheritedFlags().VisitAll(consider)
	if bestDist > maxDist {
		return ""
	}
	return best
}

// editDistance is the number of single-byte insertions, deletions,
// substitutions and transpositions of adjacent bytes that turn a into b
// (the optimal string alignment distance): "dns" is one edit from "dsn".
func editDistance(a, b string) int {
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
