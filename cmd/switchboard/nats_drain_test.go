package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestNATSDrainLeavesQueueGroup: a drained NATS echo leaves its module's
// queue group (nobody answers its subject: send fails) and joins it again
// when undrained (send succeeds), on this machine's broker.
func TestNATSDrainLeavesQueueGroup(t *testing.T) {
	dsn, _ := dsnIn(t)
	module := uniqueModule("sbdrain")
	t.Setenv("TINY_NATS_URL", "nats://127.0.0.1:4222")
	echo := start(t, "echo", "--dsn", dsn, "--name", module, "--log-level", "info")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	to := "f." + module + ".n:in"
	send := func() (int, string) {
		code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", to, "--data", "ping")
		return code, stdout + stderr
	}
	if code, out := send(); code != 0 {
		t.Fatalf("send before the drain: %d %q", code, out)
	}
	if code, out, stderr := cli(t, "drain", "--dsn", dsn, in.ID); code != 0 {
		t.Fatalf("drain: %d %q %q", code, out, stderr)
	}
	waitUntil(t, "the drained replica leaves the queue group", func() bool { code, _ := send(); return code != 0 })
	if code, out, stderr := cli(t, "drain", "--dsn", dsn, "--undo", in.ID); code != 0 {
		t.Fatalf("undrain: %d %q %q", code, out, stderr)
	}
	waitUntil(t, "the undrained replica joins the queue group again", func() bool { code, _ := send(); return code == 0 })
	if !strings.Contains(echo.stderr.String(), "queue group membership follows the drain") {
		t.Errorf("no log of the membership change: %s", echo.stderr)
	}
}

// waitUntil polls cond until it holds, failing after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNATSCtrlCLeavesQueueGroupWhileDraining: on Ctrl-C a NATS echo
// drains before it deregisters, and that drain, like one by hand, takes
// it out of its module's queue group while its row stays, draining, for
// the drain wait.
func TestNATSCtrlCLeavesQueueGroupWhileDraining(t *testing.T) {
	dsn, _ := dsnIn(t)
	module := uniqueModule("sbdrainc")
	t.Setenv("TINY_NATS_URL", "nats://127.0.0.1:4222")
	// The drain wait outlasts the test: the process is killed at its end.
	echo := start(t, "echo", "--dsn", dsn, "--name", module, "--log-level", "info", "--drain-wait", "10m")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	to := "f." + module + ".n:in"
	send := func() int {
		code, _, _ := cli(t, "send", "--dsn", dsn, "--to", to, "--data", "ping")
		return code
	}
	if code := send(); code != 0 {
		t.Fatalf("send before Ctrl-C: exit %d", code)
	}
	echo.cmd.Process.Signal(syscall.SIGINT)
	waitUntil(t, "the replica draining on Ctrl-C leaves the queue group", func() bool { return send() != 0 })
	code, out, _ := cli(t, "ls", "--dsn", dsn, "--json", "--name", module)
	var list []switchboard.Instance
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || !list[0].Draining {
		t.Fatalf("during the drain wait, ls: exit %d %q; want the row, draining", code, out)
	}
}
