package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Children are this program run again with roleEnv set; main hands them to
// runChild. The parent talks to a child over its stdin and stdout, one line
// at a time: the child prints "ready" once set up, starts measuring at
// "go", and at "end N" prints its result as one JSON line and exits.
const (
	roleEnv  = "SWITCHBOARD_BENCH_ROLE"
	storeEnv = "SWITCHBOARD_BENCH_STORE" // how the child reaches the system measured
	argEnv   = "SWITCHBOARD_BENCH_ARG"   // role-specific parameters (JSON)
)

// child is one child process as the parent sees it.
type child struct {
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *tailBuffer
}

// spawn starts this program as a child in role, reaching the store st,
// with the role's parameters arg.
func spawn(role string, st store, arg any) (*child, error) {
	a, err := json.Marshal(arg)
	if err != nil {
		return nil, err
	}
	s, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, storeEnv+"="+string(s), argEnv+"="+string(a))
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{role: role, cmd: cmd, stdin: in, lines: make(chan string, 4), stderr: &tailBuffer{max: 4096}}
	cmd.Stderr = c.stderr
	if os.Getenv("SWITCHBOARD_BENCH_LOG") != "" {
		cmd.Stderr = io.MultiWriter(c.stderr, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 256<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// next returns the child's next line, or an error when it exits or stays
// silent for timeout.
func (c *child) next(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("%s child %d exited: %s", c.role, c.cmd.Process.Pid, c.stderr)
		}
		if msg, isErr := strings.CutPrefix(l, "error: "); isErr {
			return "", fmt.Errorf("%s child %d: %s", c.role, c.cmd.Process.Pid, msg)
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("%s child %d silent for %s: %s", c.role, c.cmd.Process.Pid, timeout, c.stderr)
	}
}

// send writes one line to the child.
func (c *child) send(format string, args ...any) {
	fmt.Fprintf(c.stdin, format+"\n", args...)
}

// result waits for the child's JSON result line and decodes it into v.
func (c *child) result(v any, timeout time.Duration) error {
	l, err := c.next(timeout)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(l), v); err != nil {
		return fmt.Errorf("%s child %d: %q: %v", c.role, c.cmd.Process.Pid, l, err)
	}
	return nil
}

// stop closes the child's stdin, waits a little for it to exit, then kills
// it.
func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range c.lines {
		}
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// spawnAll starts n children, child i with arg(i), and waits until every
// one is ready. On error it stops those started.
func spawnAll(role string, st store, n int, arg func(i int) any, timeout time.Duration) ([]*child, error) {
	cs, failed, err := spawnSome(role, st, n, arg, 0, timeout)
	if err == nil && len(failed) > 0 {
		err = failed[0]
		stopAll(cs)
	}
	return cs, err
}

// spawnSome starts n children, child i with arg(i), one every stagger,
// and waits until each is ready or has failed (timeout after the last
// start): it returns the ready ones and the failures. Only a child that
// cannot be started is an error.
func spawnSome(role string, st store, n int, arg func(i int) any, stagger, timeout time.Duration) (ready []*child, failed []error, err error) {
	cs := make([]*child, 0, n)
	for i := range n {
		if i > 0 {
			time.Sleep(stagger)
		}
		c, err := spawn(role, st, arg(i))
		if err != nil {
			stopAll(cs)
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	deadline := time.Now().Add(timeout)
	var bad []*child
	for _, c := range cs {
		l, err := c.next(max(time.Until(deadline), time.Millisecond))
		if err == nil && l != "ready" {
			err = fmt.Errorf("%s child %d: %q instead of ready", role, c.cmd.Process.Pid, l)
		}
		if err != nil {
			failed = append(failed, err)
			bad = append(bad, c)
			continue
		}
		ready = append(ready, c)
	}
	stopAll(bad)
	return ready, failed, nil
}

// stopAll stops children concurrently.
func stopAll(cs []*child) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.stop)
	}
	wg.Wait()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// procCPU is the user + system CPU time of any process of this machine,
// from /proc/<pid>/stat (fields 14 and 15, in ticks of 1/100 s); 0 for a
// process that is gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// quantile returns the p-quantile of xs (nearest rank), NaN for none.
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return nan
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(p*float64(len(xs))))]
}

// loadAvg returns /proc/loadavg's three averages as text.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
