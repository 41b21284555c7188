package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchboard-io/switchboard"
)

// etcdServer is the etcd this run started: one member on loopback ports,
// its data in a temporary directory, fsync on (etcd's default).
type etcdServer struct {
	cmd     *exec.Cmd
	dir     string
	url     string
	version string
	exited  chan struct{}
}

// startEtcd starts bin (Debian's etcd-server) and waits until it serves.
func startEtcd(bin string) (*etcdServer, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v (install it: apt-get install -y etcd-server)", bin, err)
	}
	version, _, _ := strings.Cut(string(out), "\n")
	version = strings.TrimSpace(strings.TrimPrefix(version, "etcd Version:"))
	dir, err := os.MkdirTemp("", "switchboard-bench-etcd-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin,
		"--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the harness
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &etcdServer{cmd: cmd, dir: dir, url: client, version: version, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		c, err := dialEtcd(ctx, store{Kind: "etcd", DSN: client, Prefix: "/ready"})
		if err == nil {
			_, err = c.(*etcdClient).cli.Get(ctx, "ready")
			c.close()
			if err == nil {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("etcd exited: %s", log)
		case <-ctx.Done():
			s.stop()
			return nil, fmt.Errorf("etcd at %s not ready after 60 s: %v", client, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *etcdServer) pid() int { return s.cmd.Process.Pid }

// stop ends etcd and removes its data.
func (s *etcdServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// etcdClient is the same shape on etcd, written as an etcd user would: an
// entry is a key under the measurement's prefix holding the instance's
// JSON, put with the process's lease.
type etcdClient struct {
	cli    *clientv3.Client
	prefix string

	mu    sync.Mutex
	lease clientv3.LeaseID // the process's session lease, granted at the first register
}

func dialEtcd(ctx context.Context, st store) (client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{st.DSN},
		DialTimeout: 10 * time.Second,
		Context:     context.Background(),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &etcdClient{cli: cli, prefix: st.Prefix + "/"}, nil
}

// sessionTTL is the lease of register, as switchboard.DefaultTTL.
const sessionTTL = 10

func (c *etcdClient) sessionLease(ctx context.Context) (clientv3.LeaseID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == clientv3.NoLease {
		l, err := c.cli.Grant(ctx, sessionTTL)
		if err != nil {
			return 0, err
		}
		c.lease = l.ID
	}
	return c.lease, nil
}

// register puts the entry with the process's lease (granted once, as an
// etcd session does, not counted as an operation).
func (c *etcdClient) register(ctx context.Context, name string, i int64, sent int64) (string, error) {
	lease, err := c.sessionLease(ctx)
	if err != nil {
		return "", err
	}
	v, err := json.Marshal(entry(name, i, sent))
	if err != nil {
		return "", err
	}
	key := c.prefix + name + "/" + strconv.FormatInt(i, 10)
	_, err = c.cli.Put(ctx, key, string(v), clientv3.WithLease(lease))
	return key, err
}

// heartbeat is one keep-alive of the process's lease.
func (c *etcdClient) heartbeat(ctx context.Context, _ string) error {
	lease, err := c.sessionLease(ctx)
	if err == nil {
		_, err = c.cli.KeepAliveOnce(ctx, lease)
	}
	return err
}

func (c *etcdClient) deregister(ctx context.Context, key string) error {
	_, err := c.cli.Delete(ctx, key)
	return err
}

// watch watches the prefix; fn gets every created key's stamp, decoded
// from its JSON as a Switchboard watcher decodes its instances.
func (c *etcdClient) watch(ctx context.Context, fn func(sent int64)) error {
	wch := c.cli.Watch(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	first, ok := <-wch
	if !ok {
		return errors.New("etcd watch closed before it was created")
	}
	if err := first.Err(); err != nil {
		return err
	}
	if !first.Created {
		return errors.New("etcd watch: first response is not the creation")
	}
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if !ev.IsCreate() {
					continue
				}
				var in switchboard.Instance
				if json.Unmarshal(ev.Kv.Value, &in) != nil {
					continue
				}
				if sent, err := strconv.ParseInt(in.Metadata["sent"], 10, 64); err == nil {
					fn(sent)
				}
			}
		}
	}()
	return nil
}

// etcdFleetTTL is the fleet's lease TTL, Switchboard's (fleetTTL): the
// client's KeepAlive renews it every TTL/3, about every 1.7 s. (A TTL of
// 3 s, for renewals every second, lost most leases at start on a machine
// at load average 80.)
const etcdFleetTTL = 5

// hold puts n keys with one lease of the process and keeps the lease alive
// with the client's KeepAlive stream.
func (c *etcdClient) hold(ctx context.Context, name string, n int, _ bool) (func() holdStats, error) {
	var setup int64
	for attempt := 1; ; attempt++ {
		ka, stop, lost, err := c.putUnderLease(ctx, name, n, &setup)
		if err != nil {
			return nil, err
		}
		if lost {
			// The lease expired before all its keys were put (its keep-alives
			// came late on a busy machine), and took the keys put so far with
			// it: start over under a new lease, as a client of an etcd session
			// does when the session is lost, and count the failure.
			setup++
			if attempt == 5 {
				return nil, fmt.Errorf("fleet: the lease expired %d times while its %d keys were put", attempt, n)
			}
			quiet.Warn("bench: lease lost while putting its keys; starting over under a new one")
			continue
		}
		var renewals, failures atomic.Int64
		failures.Store(setup)
		go func() {
			defer stop()
			for range ka {
				renewals.Add(int64(n)) // one response renews the n keys
			}
			if ctx.Err() == nil {
				failures.Add(1) // the lease was lost
			}
		}()
		return func() holdStats {
			return holdStats{Renewals: renewals.Load(), Failures: failures.Load()}
		}, nil
	}
}

// putUnderLease grants a lease, keeps it alive and puts the process's n
// keys under it; stop ends the keep-alive (which also ends with ctx). lost
// is true (and the keep-alive stopped) when the lease expired before every
// key was put.
func (c *etcdClient) putUnderLease(ctx context.Context, name string, n int, setup *int64) (ka <-chan *clientv3.LeaseKeepAliveResponse, stop func(), lost bool, err error) {
	var l *clientv3.LeaseGrantResponse
	if err := retry(ctx, setup, func() (err error) {
		l, err = c.cli.Grant(ctx, etcdFleetTTL)
		return err
	}); err != nil {
		return nil, nil, false, err
	}
	// Kept alive from the start: putting the keys may take longer than
	// the TTL on a busy machine.
	kctx, stop := context.WithCancel(ctx)
	ka, err = c.cli.KeepAlive(kctx, l.ID)
	if err != nil {
		stop()
		return nil, nil, false, err
	}
	for i := range n {
		v, err := json.Marshal(entry(name, int64(i), 0))
		if err != nil {
			stop()
			return nil, nil, false, err
		}
		err = retry(ctx, setup, func() error {
			_, err := c.cli.Put(ctx, c.prefix+name+"/"+strconv.Itoa(i), string(v), clientv3.WithLease(l.ID))
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				lost = true
				return nil // no retry under this lease
			}
			return err
		})
		if err != nil || lost {
			stop()
			return nil, nil, lost, err
		}
	}
	return ka, stop, false, nil
}

func (c *etcdClient) live(ctx context.Context) (int, error) {
	resp, err := c.cli.Get(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(resp.Count), nil
}

func (c *etcdClient) close() error { return c.cli.Close() }
