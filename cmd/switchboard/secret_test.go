package main

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// deregister over a server of a row another client registered: without
// its secret the one line says which options exist; --secret (or
// SWITCHBOARD_INSTANCE_SECRET) with the secret register --secret chose
// drains and undrains it, then deletes it; a wrong one says so; --secret with a catalog opened directly,
// or a secret the server would refuse, is invalid input.
func TestDeregisterWithSecret(t *testing.T) {
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "client-token-0123")
	dsn, _ := dsnIn(t)
	_, url := serveProc(t, "--dsn", dsn, "--token", "client-token-0123")

	const chosen = "chosen-secret-0123456789"
	owner := start(t, "register", "--dsn", url, "--name", "owned", "--type", "t", "--address", "127.0.0.1:7001", "--id", "owned-1")
	owner.line(t)
	chosenOwner := start(t, "register", "--dsn", url, "--name", "owned", "--type", "t", "--address", "127.0.0.1:7002", "--id", "owned-2", "--secret", chosen)
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(chosenOwner.line(t)), &in); err != nil || in.ID != "owned-2" {
		t.Fatalf("register --secret printed %+v (%v)", in, err)
	}

	for _, tc := range []struct {
		args   []string
		env    string // SWITCHBOARD_INSTANCE_SECRET
		code   int
		stdout string
		stderr string
	}{
		{[]string{"deregister", "--dsn", url, "owned-1"}, "", 1, "",
			`switchboard: instance "owned-1" was registered at ` + url + ` by another client, which holds its secret: pass it with --secret or SWITCHBOARD_INSTANCE_SECRET (register --secret chooses it), use the server's admin token as SWITCHBOARD_HTTP_TOKEN, or stop that client (it deregisters as it exits)` + "\n"},
		{[]string{"deregister", "--dsn", url, "owned-2", "--secret", "not-the-secret-0123"}, "", 1, "",
			`switchboard: wrong secret for instance "owned-2" at ` + url + ` (--secret or SWITCHBOARD_INSTANCE_SECRET)` + "\n"},
		{[]string{"deregister", "--dsn", url, "owned-2", "--secret", "short"}, "", 2, "",
			`switchboard: --secret "(hidden)": must be 16 to 256 printable ASCII characters, without spaces; run 'switchboard deregister --help'` + "\n"},
		{[]string{"deregister", "--dsn", dsn, "owned-2", "--secret", chosen}, "", 2, "",
			`switchboard: --secret "(hidden)": instance secrets belong to a switchboard server: use it with --dsn http://… or https://… (a catalog opened directly has none); run 'switchboard deregister --help'` + "\n"},
		{[]string{"drain", "--dsn", url, "owned-2", "--secret", chosen}, "", 0, "drained owned-2 (status draining)\n", ""},
		{[]string{"drain", "--dsn", url, "owned-2", "--undo"}, chosen, 0, "undrained owned-2 (status passing)\n", ""},
		{[]string{"deregister", "--dsn", url, "owned-2"}, chosen, 0, "deregistered owned-2\n", ""},
	} {
		t.Setenv("SWITCHBOARD_INSTANCE_SECRET", tc.env)
		code, stdout, stderr := cli(t, tc.args...)
		if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%q (env %q): exit %d, stdout %q, stderr\n %q\nwant exit %d, stdout %q and\n %q", tc.args, tc.env, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// A secret opens only the row it was chosen for.
	t.Setenv("SWITCHBOARD_INSTANCE_SECRET", "")
	code, stdout, stderr := cli(t, "deregister", "--dsn", url, "owned-1", "--secret", chosen)
	if code != 1 || stdout != "" || stderr != `switchboard: wrong secret for instance "owned-1" at `+url+` (--secret or SWITCHBOARD_INSTANCE_SECRET)`+"\n" {
		t.Errorf("owned-1 with another row's secret: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
