package main

import (
	"testing"
)

// An unknown flag gets a suggestion when one of the command's flags (its
// own or a global one) is close, as an unknown command does; the line is
// exact, and the exit code 2.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"register", "--capabilty", "x"}, "switchboard: unknown flag: --capabilty (did you mean --capability?); run 'switchboard register --help'\n"},
		{[]string{"register", "--capabilty=x"}, "switchboard: unknown flag: --capabilty (did you mean --capability?); run 'switchboard register --help'\n"},
		{[]string{"ls", "--dns", "sqlite://x"}, "switchboard: unknown flag: --dns (did you mean --dsn?); run 'switchboard ls --help'\n"},
		{[]string{"ls", "--Capability", "x"}, "switchboard: unknown flag: --Capability (did you mean --capability?); run 'switchboard ls --help'\n"},
		{[]string{"reap", "--older", "1h"}, "switchboard: unknown flag: --older (did you mean --older-than?); run 'switchboard reap --help'\n"},
		{[]string{"ls", "--nope"}, "switchboard: unknown flag: --nope; run 'switchboard ls --help'\n"},
		{[]string{"ls", "-Z"}, "switchboard: unknown shorthand flag: 'Z' in -Z; run 'switchboard ls --help'\n"},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		if code != 2 || stdout != "" || stderr != tc.want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n %q\nwant exit 2 and\n %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}
