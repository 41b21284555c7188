package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard/internal/suggest"
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

// suggestFlag is the visible flag of cmd (its own and those it inherits)
// closest to name (suggest.Closest, within cmd's suggestion distance: two
// edits by default); "" when none is close.
func suggestFlag(cmd *cobra.Command, name string) string {
	maxDist := cmd.SuggestionsMinimumDistance
	if r := cmd.Root(); maxDist <= 0 && r != nil {
		maxDist = r.SuggestionsMinimumDistance
	}
	if maxDist <= 0 {
		maxDist = 2
	}
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return suggest.Closest(name, names, maxDist)
}
