package main

import (
	"encoding/json"
	"strings"
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
