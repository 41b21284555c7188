package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// The first Ctrl-C deregisters gracefully; a second one forces the exit at
// once, even while the catalog's write lock is held elsewhere so that the
// deregistration cannot finish. A real process, real
// signals.
func TestSecondInterruptForcesExit(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dsn, path := dsnIn(t)
		secondInterrupt(t, dsn, func(ctx context.Context) func() {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			return func() {
				conn.ExecContext(ctx, "ROLLBACK")
				conn.Close()
				db.Close()
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, drop, err := pgtest.NewDatabase(ctx)
		if err != nil {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Cleanup(drop)
		secondInterrupt(t, dsn, func(ctx context.Context) func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE instances IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			return func() {
				tx.Rollback(ctx)
				conn.Close(ctx)
			}
		})
	})
}

func secondInterrupt(t *testing.T, dsn string, lock func(context.Context) (unlock func())) {
	ctx := context.Background()
	p := start(t, "register", "--dsn", dsn, "--name", "stuck", "--type", "w", "--address", "127.0.0.1:1",
		"--ttl", "1m", "--heartbeat", "100ms")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(p.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	unlock := lock(ctx)
	released := false
	defer func() {
		if !released {
			unlock()
		}
	}()

	// Interrupt until the process is gone: two signals sent back to back
	// may be merged into one by the kernel, so keep sending.
	exited := make(chan error, 1)
	go func() {
		for range p.lines {
		}
		exited <- <-p.done
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	var err error
	for sent := 0; ; {
		select {
		case <-tick.C:
			if p.cmd.Process.Signal(syscall.SIGINT) == nil {
				sent++
			}
			continue
		case err = <-exited:
		case <-timeout:
			t.Fatalf("the process survived repeated Ctrl-C; stderr %s", p.stderr)
		}
		if sent < 2 {
			t.Fatalf("exited after %d interrupts: %v; stderr %s", sent, err, p.stderr)
		}
		break
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want code 130; stderr %s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "switchboard: second interrupt: exiting without clean-up") {
		t.Fatalf("stderr %q", p.stderr)
	}
	unlock()
	released = true
	// The forced exit skipped the deregistration: the row is still there
	// (it would expire after its TTL).
	cat := openCatalog(t, dsn)
	if _, err := cat.Get(ctx, in.ID); err != nil {
		t.Fatalf("row after the forced exit: %v (the deregistration was not skipped)", err)
	}
}

// interrupts: the first signal cancels; a slow shutdown on a terminal
// says how to force it; the second signal exits with 128 + its number.
func TestInterruptsUnit(t *testing.T) {
	for _, tc := range []struct {
		sig      os.Signal
		terminal bool
		code     int
	}{{os.Interrupt, true, 130}, {syscall.SIGTERM, false, 143}} {
		sigs := make(chan os.Signal, 2)
		canceled := make(chan struct{})
		codes := make(chan int, 1)
		stderr := &testkit.SyncBuffer{}
		go interrupts(sigs, func() { close(canceled) }, stderr, tc.terminal, func(c int) { codes <- c })
		sigs <- tc.sig
		select {
		case <-canceled:
		case <-time.After(30 * time.Second):
			t.Fatal("the first signal did not cancel")
		}
		if tc.terminal {
			testkit.WaitUntil(t, "the hint to press Ctrl-C again", func() bool {
				return strings.Contains(stderr.String(), "press Ctrl-C again to exit at once")
			})
		}
		select {
		case c := <-codes:
			t.Fatalf("exited with %d after one signal", c)
		default:
		}
		sigs <- tc.sig
		select {
		case c := <-codes:
			if c != tc.code {
				t.Fatalf("%v: exit %d, want %d", tc.sig, c, tc.code)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the second signal did not exit")
		}
		if !tc.terminal && strings.Contains(stderr.String(), "press Ctrl-C") {
			t.Fatalf("hint printed off a terminal: %q", stderr)
		}
	}
}
