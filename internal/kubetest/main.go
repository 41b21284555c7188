// Command kubetest runs a real kube-apiserver backed by an embedded etcd, both
// on free loopback ports, for Switchboard's Kubernetes tests.
//
// It is its own Go module (see go.mod) so that the Kubernetes server code and
// its replace directives never reach the library's go.mod. It writes a
// kubeconfig for the server to the path given by -kubeconfig, prints
// "READY <path>" on standard output once the server answers, and runs until
// it receives SIGINT or SIGTERM or its standard input is closed (so it dies
// with the test process that started it), then tears the server down.
//
// Build it without -trimpath: the test server finds its testdata through
// runtime.Caller.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apitesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "where to write the kubeconfig (required)")
	rbac := flag.Bool("rbac", false, "authorize with RBAC instead of AlwaysAllow")
	watchStdin := flag.Bool("stdin", true, "stop when standard input is closed")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "kubetest: -kubeconfig is required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *rbac, *watchStdin); err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, rbac, watchStdin bool) error {
	dir, err := os.MkdirTemp("", "kubetest-etcd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	etcd, etcdURL, err := startEtcd(dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}

	flags := []string{"--disable-admission-plugins=ServiceAccount"}
	if rbac {
		flags = append(flags, "--authorization-mode=RBAC")
	}
	tb := newTB()
	server, err := apitesting.StartTestServer(tb, nil, flags, storage)
	if err != nil {
		tb.runCleanups()
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := writeKubeconfig(kubeconfig, server.ClientConfig); err != nil {
		server.TearDownFn()
		tb.runCleanups()
		return err
	}
	fmt.Printf("READY %s\n", kubeconfig)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	if watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
			close(done)
		}()
	}
	select {
	case <-stop:
	case <-done:
	case <-tb.failed:
	}
	server.TearDownFn()
	tb.runCleanups()
	return nil
}

// startEtcd starts a single-member etcd on two free loopback ports.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	clientURL, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	peerURL, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "kubetest"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true // test data: nothing to keep across a crash
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", errors.New("not ready after 60s")
	}
	return e, clientURL.String(), nil
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	return url.Parse("http://" + addr)
}

func writeKubeconfig(path string, c *restclient.Config) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{
		Server:                   c.Host,
		CertificateAuthorityData: c.CAData,
		TLSServerName:            c.ServerName,
		InsecureSkipTLSVerify:    c.Insecure,
	}
	cfg.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{
		Token:                 c.BearerToken,
		ClientCertificateData: c.CertData,
		ClientKeyData:         c.KeyData,
	}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest", Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// tb is the small part of testing.TB that the Kubernetes test server needs,
// for a program instead of a test.
type tb struct {
	mu       sync.Mutex
	cleanups []func()
	failed   chan struct{}
	once     sync.Once
	dir      string
}

func newTB() *tb { return &tb{failed: make(chan struct{})} }

func (t *tb) Attr(key, value string) {}
func (t *tb) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		t.Fatalf("chdir %s: %v", dir, err)
	}
}
func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *tb) runCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
func (t *tb) Error(args ...any) { t.log("ERROR", fmt.Sprint(args...)); t.Fail() }
func (t *tb) Errorf(format string, args ...any) {
	t.log("ERROR", fmt.Sprintf(format, args...))
	t.Fail()
}
func (t *tb) Fail()    { t.once.Do(func() { close(t.failed) }) }
func (t *tb) FailNow() { t.Fail(); panic("kubetest: FailNow") }
func (t *tb) Failed() bool {
	select {
	case <-t.failed:
		return true
	default:
		return false
	}
}
func (t *tb) Fatal(a ...any) { t.log("FATAL", fmt.Sprint(a...)); t.FailNow() }
func (t *tb) Fatalf(format string, args ...any) {
	t.log("FATAL", fmt.Sprintf(format, args...))
	t.FailNow()
}
func (t *tb) Helper()                          {}
func (t *tb) Log(args ...any)                  { t.log("", fmt.Sprint(args...)) }
func (t *tb) Logf(format string, args ...any)  { t.log("", fmt.Sprintf(format, args...)) }
func (t *tb) Name() string                     { return "kubetest" }
func (t *tb) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (t *tb) Skip(args ...any)                 { t.Fatal(args...) }
func (t *tb) Skipf(format string, args ...any) { t.Fatalf(format, args...) }
func (t *tb) SkipNow()                         { t.FailNow() }
func (t *tb) Skipped() bool                    { return false }
func (t *tb) TempDir() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dir == "" {
		d, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			panic(err)
		}
		t.dir = d
		t.cleanups = append(t.cleanups, func() { os.RemoveAll(d) })
	}
	return t.dir
}

func (t *tb) log(level, msg string) {
	if os.Getenv("KUBETEST_VERBOSE") == "" && level == "" {
		return
	}
	msg = strings.TrimRight(msg, "\n")
	if level != "" {
		msg = level + ": " + msg
	}
	fmt.Fprintln(os.Stderr, "kubetest:", msg)
}
