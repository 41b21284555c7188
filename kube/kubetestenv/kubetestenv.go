// Package kubetestenv starts a real kube-apiserver (with an embedded etcd)
// for the tests of the Kubernetes backend, from the program in
// internal/kubetest (a Go module of its own, so the Kubernetes server code
// never reaches the library's go.mod).
//
// The program is built by .ci/kubetest-build (cold: ~15 minutes and ~3 GB on
// two cores; warm: seconds), which prints its path. Tests find it through
// SWITCHBOARD_KUBETEST_BIN, or at DefaultBinary when that is unset. When
// SWITCHBOARD_KUBETEST_REQUIRED is set (as .ci/run does), a missing or
// failing server fails the tests; otherwise they skip, saying how to build it.
package kubetestenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Environment variables read by Start and Main.
const (
	// EnvBinary is the path of the built internal/kubetest program.
	EnvBinary = "SWITCHBOARD_KUBETEST_BIN"
	// EnvRequired, when non-empty, makes an unavailable server a failure
	// instead of a skip.
	EnvRequired = "SWITCHBOARD_KUBETEST_REQUIRED"
)

// DefaultBinary is where .ci/kubetest-build puts the program when
// SWITCHBOARD_KUBETEST_BIN is not set: $XDG_CACHE_HOME/switchboard/kubetest
// (usually ~/.cache/switchboard/kubetest).
func DefaultBinary() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "switchboard", "kubetest")
}

// Binary returns the program's path: SWITCHBOARD_KUBETEST_BIN or
// DefaultBinary.
func Binary() string {
	if p := os.Getenv(EnvBinary); p != "" {
		return p
	}
	return DefaultBinary()
}

// Server is a running kube-apiserver.
type Server struct {
	// Kubeconfig is the path of a kubeconfig for the server (a bearer token
	// of the loopback client: full rights).
	Kubeconfig string
	// Config is the client configuration read from Kubeconfig.
	Config *rest.Config

	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string
	done  chan struct{}
	once  sync.Once
}

// Start runs the program and waits until the server answers (or ctx ends).
// Extra arguments are passed on (e.g. "-rbac").
func Start(ctx context.Context, args ...string) (*Server, error) {
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-apiserver test program %s not found (%v): build it with `bash .ci/kubetest-build` (cold: ~15 min, ~3 GB) or set %s", bin, err, EnvBinary)
	}
	dir, err := os.MkdirTemp("", "switchboard-kubetest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Kubeconfig: filepath.Join(dir, "kubeconfig"), dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"-kubeconfig", s.Kubeconfig}, args...)...)
	s.cmd.Stderr = &tail{max: 8 << 10}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// The program stops when its stdin closes: it dies with this process.
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				ready <- nil
			}
		}
		ready <- errors.New("exited before it was ready")
		_ = s.cmd.Wait()
		close(s.done)
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	}
	if err == nil {
		// As the API server's own test clients: no client-side throttling.
		s.Config.QPS, s.Config.Burst = 1000, 10000
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("kube-apiserver test program: %w; stderr: %s", err, s.cmd.Stderr.(*tail).String())
	}
	return s, nil
}

// Close stops the server and removes its files. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		_ = s.stdin.Close()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		os.RemoveAll(s.dir)
	})
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
)

// Main is a TestMain for a package whose tests need the server: it starts
// one for the whole package, sets KUBECONFIG to it, runs the tests, and
// stops it. Tests call Require to get it.
func Main(m *testing.M) {
	startShared()
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func startShared() {
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared, sharedErr = Start(ctx)
		if sharedErr == nil {
			os.Setenv("KUBECONFIG", shared.Kubeconfig)
		}
	})
}

// Require returns the process's server, starting it at the first call when
// Main did not (it then stops when the test process exits: its standard
// input closes). When it cannot start, the test fails if
// SWITCHBOARD_KUBETEST_REQUIRED is set and skips otherwise, with the reason.
func Require(t testing.TB) *Server {
	t.Helper()
	startShared()
	if shared != nil {
		return shared
	}
	err := sharedErr
	if os.Getenv(EnvRequired) != "" {
		t.Fatalf("no Kubernetes API server (%s is set): %v", EnvRequired, err)
	}
	t.Skipf("no Kubernetes API server, skipping (set %s to make this a failure): %v", EnvRequired, err)
	return nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
