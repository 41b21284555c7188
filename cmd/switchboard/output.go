package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard/internal/textcut"
)

// Output formats of ls, watch and leases.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
)

// outputFlags are -o/--output and its alias --json.
type outputFlags struct {
	format string
	json   bool
}

func (o *outputFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.format, "output", "o", formatTable, "output format: table, wide (every column, nothing truncated) or json")
	f.BoolVar(&o.json, "json", false, "same as -o json")
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{
		cobra.CompletionWithDesc(formatTable, "columns for people, long lists truncated"),
		cobra.CompletionWithDesc(formatWide, "every column, nothing truncated"),
		cobra.CompletionWithDesc(formatJSON, "JSON for scripts"),
	}, cobra.ShellCompDirectiveNoFileComp))
}

// resolve returns the chosen format; --json with another -o is an error.
func (o *outputFlags) resolve(cmd *cobra.Command) (string, error) {
	switch o.format {
	case formatTable, formatWide, formatJSON:
	default:
		return "", usagef("--output %q: want table, wide or json", o.format)
	}
	if o.json {
		if cmd.Flags().Changed("output") && o.format != formatJSON {
			return "", usagef("--json and --output %s contradict each other; use one", o.format)
		}
		return formatJSON, nil
	}
	return o.format, nil
}

// dash stands for an empty cell, so columns stay countable, and shows the
// others printable (see printable).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// printable escapes the control characters of a value another process
// wrote (a version, metadata, a lease holder: free text in the catalog) as
// Go escapes ("\x1b", "\t", "\n", "\u202e"), so a table cell can neither
// send escape sequences to the operator's terminal (retitle it, rewrite the
// screen, write the clipboard), nor break its line or its columns, nor
// reverse the text after it. The json formats are for programs and keep
// values as stored (encoding/json escapes the C0 controls).
func printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unprintable(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unprintable reports control characters (C0, DEL, C1) and the
// bidirectional formatting characters.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || r == '\u200e' || r == '\u200f' || ('\u202a' <= r && r <= '\u202e') || ('\u2066' <= r && r <= '\u2069')
}

// maxCapsWidth bounds the capabilities cell of the table format.
const maxCapsWidth = 40

// capsCell joins capabilities; unless whole, it keeps those that fit in
// maxCapsWidth and counts the rest ("storage,routing,+3 more").
func capsCell(caps []string, whole bool) string {
	if len(caps) == 0 {
		return "-"
	}
	all := strings.Join(caps, ",")
	if whole || len(all) <= maxCapsWidth {
		return all
	}
	var b strings.Builder
	for i, c := range caps {
		more := ",+" + strconv.Itoa(len(caps)-i) + " more"
		if i > 0 && b.Len()+1+len(c)+len(more) > maxCapsWidth {
			return b.String() + more
		}
		if i == 0 && len(c)+len(more) > maxCapsWidth {
			c = textcut.Fit(c, maxCapsWidth-len(more))
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c)
	}
	return b.String()
}

// metaCell is k=v,… in key order.
func metaCell(md map[string]string) string {
	if len(md) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(md)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(printable(k) + "=" + printable(md[k]))
	}
	return b.String()
}

// fit pads s to width, or cuts it with "…" when it is longer (unless
// whole), so streamed columns stay aligned.
func fit(s string, width int, whole bool) string {
	if n := len([]rune(s)); n > width {
		if whole {
			return s
		}
		return string([]rune(s)[:width-1]) + "…"
	} else {
		return s + strings.Repeat(" ", width-n)
	}
}

// clock formats t in the local zone with the zone's name, with the date
// when it is not the same day as now: "15:04:05.000 CET",
// "2026-11-30 15:04:05.000 CET". layout is the time of day.
func clock(t, now time.Time, layout string) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format(layout + " MST")
	}
	return t.Format("2006-01-02 " + layout + " MST")
}

// age is how long ago t was, as kubectl prints it: "850ms", "42s", "3m10s".
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		m := int(d.Round(time.Minute).Minutes())
		return strconv.Itoa(m/60) + "h" + strconv.Itoa(m%60) + "m"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
