package upgradetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// proc is a long-running process (serve, register, watch, a leaser).
type proc struct {
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser // stdin, for startInput's
	mu     sync.Mutex     // guards out
	out    []string       // stdout lines
	stderr testkit.SyncBuffer
	done   chan struct{}
	err    error
}

// start runs bin with args and env, stopped (SIGKILL) at the test's end
// if still running.
func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, name, bin, env, false, args)
}

// startInput is start with a pipe to the process's stdin (proc.in).
func startInput(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, name, bin, env, true, args)
}

func startProc(t *testing.T, name, bin string, env []string, input bool, args []string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if input {
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", p.name, strings.Join(p.lines(), "\n"), p.name, p.errText())
		}
	})
	return p
}

func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.out...)
}

func (p *proc) errText() string { return p.stderr.String() }

// waitLine waits until p has printed a line match accepts and returns the
// first such; it fails t if p exits first.
func (p *proc) waitLine(t *testing.T, what string, match func(line string) bool) string {
	t.Helper()
	var found string
	waitFor(t, what, func() bool {
		for _, l := range p.lines() {
			if match(l) {
				found = l
				return true
			}
		}
		if p.exited() {
			t.Fatalf("%s exited: %v: %s", p.name, p.err, p.errText())
		}
		return false
	})
	return found
}

// decodeLines decodes each line p printed so far as JSON.
func decodeLines[T any](t *testing.T, p *proc) []T {
	t.Helper()
	var out []T
	for _, l := range p.lines() {
		out = append(out, decodeLine[T](t, p, l))
	}
	return out
}

// decodeLine decodes l, a line p printed, as JSON.
func decodeLine[T any](t *testing.T, p *proc, l string) T {
	t.Helper()
	var x T
	if err := json.Unmarshal([]byte(l), &x); err != nil {
		t.Fatalf("%s printed %q: %v", p.name, l, err)
	}
	return x
}

// stop sends sig and waits for the process to exit; it fails t when the
// process does not exit 0 (SIGTERM and SIGINT end register and watch
// cleanly) unless sig is SIGKILL.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit after %v", p.name, sig)
	}
	if sig != syscall.SIGKILL && p.err != nil {
		t.Fatalf("%s exited with %v after %v; stderr:\n%s", p.name, p.err, sig, p.errText())
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run runs bin to completion and returns its stdout, stderr and error.
func run(t *testing.T, bin string, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), stderr.String(), err
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v did not finish", bin, args)
		return "", "", nil
	}
}

// instance is the part of an instance's JSON every release writes.
type instance struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Address  string `json:"address"`
	LastSeen string `json:"last_seen"`
	Stale    bool   `json:"stale"`
}

// ls lists the catalog at dsn with bin's `ls --json`.
func ls(t *testing.T, bin, dsn string, env []string) (map[string]instance, error) {
	t.Helper()
	out, stderr, err := run(t, bin, env, "--dsn", dsn, "ls", "--json")
	if err != nil {
		return nil, fmt.Errorf("ls: %v: %s", err, strings.TrimSpace(stderr))
	}
	var list []instance
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("ls output %q: %v", out, err)
	}
	m := make(map[string]instance, len(list))
	for _, in := range list {
		m[in.ID] = in
	}
	return m, nil
}

// event is one line of `watch --json`.
type event struct {
	Event    string   `json:"event"`
	Instance instance `json:"instance"`
}

// events are the events p (a `watch --json`) printed so far.
func (p *proc) events(t *testing.T) []event {
	t.Helper()
	return decodeLines[event](t, p)
}

// saw reports whether p (a watch) printed an event of kind (a prefix:
// "removed" matches every removal) for id.
func (p *proc) saw(t *testing.T, kind, id string) bool {
	for _, ev := range p.events(t) {
		if strings.HasPrefix(ev.Event, kind) && ev.Instance.ID == id {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds, failing t after a generous deadline
// (processes start slowly on a loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// release names a binary of binaries in messages: "old" or "new".
func release(bin string) string {
	if bin == oldBin {
		return "old"
	}
	return "new"
}
