package remote_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// binDir holds the switchboard binary the process tests build (removed by
// TestMain).
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// switchboardBinary builds cmd/switchboard once per test binary (without
// the Kubernetes client and the embedded NATS broker, which serve over
// PostgreSQL does not use).
func switchboardBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binError = os.MkdirTemp("", "sb-remote-test-"); binError != nil {
			return
		}
		binPath = filepath.Join(binDir, "switchboard")
		out, err := exec.Command("go", "build", "-tags", "nokube,nonats", "-o", binPath, "../cmd/switchboard").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build ./cmd/switchboard: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// serveProcess is a `switchboard serve` process on one address, which a
// test may kill and start again on the same address.
type serveProcess struct {
	t    testing.TB
	dsn  string
	addr string // 127.0.0.1:PORT, fixed by the first start
	cmd  *exec.Cmd
	done chan struct{}
	log  *testkit.SyncBuffer
}

// startServe runs `switchboard serve` over the catalog dsn on a port of
// its choosing, and waits until it listens.
func startServe(t testing.TB, dsn string) *serveProcess {
	t.Helper()
	p := &serveProcess{t: t, dsn: dsn, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *serveProcess) start() {
	p.t.Helper()
	cmd := exec.Command(switchboardBinary(p.t), "serve", "--dsn", p.dsn, "--listen", p.addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HTTP_TOKEN=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	p.log = &testkit.SyncBuffer{}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				lines <- sc.Text()
				first = false
			}
		}
		close(lines)
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(p.done)
	}()
	select {
	case line := <-lines:
		_, rest, ok := strings.Cut(line, "listening on http://")
		if !ok {
			p.t.Fatalf("serve printed %q; stderr: %s", line, p.log)
		}
		p.addr, _, _ = strings.Cut(rest, " ")
	case <-time.After(60 * time.Second):
		p.t.Fatalf("serve did not say it listens within a minute; stderr: %s", p.log)
	}
}

// url is the server's http:// URL.
func (p *serveProcess) url() string { return "http://" + p.addr }

// signal sends sig and waits for the process to end.
func (p *serveProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(sig)
	<-p.done
	p.cmd = nil
}

func (p *serveProcess) kill() { p.signal(syscall.SIGKILL) }

// restart starts the server again on its address.
func (p *serveProcess) restart() {
	p.t.Helper()
	p.start()
}

// startRegister runs `switchboard register` through dsn (the process
// heartbeats until killed at cleanup) and waits for the row it prints.
func startRegister(t testing.TB, dsn, id string, ttl time.Duration) {
	t.Helper()
	cmd := exec.Command(switchboardBinary(t), "register", "--dsn", dsn, "--name", "failover-cli", "--type", "querier",
		"--address", "127.0.0.1:9200", "--id", id, "--ttl", ttl.String(), "--log-level", "warn")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_HTTP_TOKEN=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	first := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	select {
	case line := <-first:
		if !strings.Contains(line, `"id":"`+id+`"`) {
			t.Fatalf("register printed %q; stderr: %s", line, stderr)
		}
	case <-done:
		t.Fatalf("register ended: %s", stderr)
	}
}

// renewals is the server's switchboard_http_heartbeats_total (instances
// renewed through it since it started), -1 when it cannot be read.
func (p *serveProcess) renewals() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "switchboard_http_heartbeats_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}
