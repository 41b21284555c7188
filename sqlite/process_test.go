//go:build unix

package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// holdLockEnv makes the test binary a child process that takes the write
// lock of the catalog named by its value, says "locked", and keeps it.
const holdLockEnv = "SWITCHBOARD_TEST_HOLD_WLOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(halfMigrateEnv); path != "" {
		halfMigrate(path)
	}
	if path := os.Getenv(holdLockEnv); path != "" {
		l, err := newWriteLock(path)
		if err == nil {
			_, err = l.lock(context.Background())
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		select {}
	}
	os.Exit(m.Run())
}

// startChild runs the test binary as a child process with env set to
// value (TestMain makes it the child that env names) and waits for its
// first line of output to be say. It fails t, killing the child, when the
// line is another or does not come in a minute.
func startChild(t *testing.T, env, value, say string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+value)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != say {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child %s: said %q, want %q", env, s, say)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child %s did not say %q", env, say)
	}
	return cmd
}

// holdLock starts another process that takes path's write lock, then stops
// it (SIGSTOP) while it holds the lock. The returned function resumes and
// kills it.
func holdLock(t *testing.T, path string) (resume func()) {
	t.Helper()
	cmd := startChild(t, holdLockEnv, path, "locked")
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := false
	resume = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(resume)
	return resume
}

// A stopped process holding the write lock makes writers of other
// processes give up with a clear error after the busy timeout, instead of
// waiting forever (a CLI register without a deadline hung); reads go on,
// and writes work again once the holder is gone.
func TestWriteLockHolderStopped(t *testing.T) {
	c, path := newFile(t)
	mustRegister(t, c, sample("before"))
	c.d.wlock.wait = 300 * time.Millisecond
	resume := holdLock(t, path)

	done := make(chan error, 2)
	go func() {
		_, err := c.Register(context.Background(), sample("blocked")) // no deadline
		done <- err
	}()
	go func() {
		_, err := c.Heartbeat(context.Background(), "before")
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, switchboard.ErrBusy) || !strings.Contains(err.Error(), "write lock") {
				t.Fatalf("want ErrBusy naming the write lock, got %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a writer waited on a stopped process's lock without giving up")
		}
	}
	if _, err := c.Get(tctx(t), "before"); err != nil {
		t.Fatalf("read while the lock is held: %v", err)
	}
	if _, err := c.Get(tctx(t), "blocked"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the given-up register was stored: %v", err)
	}
	resume()
	// The lock holder is gone; the abandoned flock is taken and dropped,
	// and writers proceed.
	c.d.wlock.wait = time.Minute
	mustRegister(t, c, sample("after"))
}

// Close never drops a lock a writer still holds: the descriptor stays open
// until the writer releases it, however long that takes.
func TestWriteLockCloseKeepsHeldLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	mine, err := newWriteLock(path)
	if err != nil {
		t.Fatal(err)
	}
	mine.closeWait = 20 * time.Millisecond
	other, err := newWriteLock(path) // its own descriptor: another owner, as another process
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	unlock, err := mine.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := mine.close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // past closeWait
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := other.lock(ctx); err == nil {
		t.Fatal("close dropped the lock a writer still held")
	}
	unlock()
	got, err := other.lock(tctx(t))
	if err != nil {
		t.Fatalf("the lock was not freed by the release after close: %v", err)
	}
	got()
}
