// Package embedded runs a NATS broker inside the process (nats-server/v2):
// JetStream on, listening on loopback, its store in a directory of the
// caller's. It is what `switchboard nats` and the all-in-one mode start so
// the primary wire works with nothing installed. It lives apart from
// natswire so programs that only talk to a broker do not link one.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchboard-io/switchboard"
)

// DefaultPort is the NATS client port.
const DefaultPort = 4222

// Options configure a broker.
type Options struct {
	// Dir is where JetStream stores streams (required; created if absent).
	// One broker at a time uses it: a second Start on the same Dir fails
	// while the first runs (a lock file in Dir, on Unix).
	Dir string
	// Host to listen on (default 127.0.0.1). The broker has no
	// authentication: keep it on loopback unless the network is trusted.
	Host string
	// Port to listen on: 0 means DefaultPort, -1 any free port.
	Port int
	// ReadyTimeout bounds the wait for the broker to accept connections
	// (default 10 s).
	ReadyTimeout time.Duration
	// Logger receives the broker's notices and errors (nil: slog.Default()).
	Logger *slog.Logger
}

// lockName is the lock file the broker keeps in its data dir (on Unix).
const lockName = "switchboard-nats.lock"

// storeName is the directory nats-server keeps its streams in, under
// StoreDir.
const storeName = "jetstream"

// firstMissing is the outermost directory of dir's path that does not
// exist ("" when dir exists or cannot be examined): what MkdirAll(dir)
// creates.
func firstMissing(dir string) string {
	missing := ""
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			return missing
		} else if !errors.Is(err, os.ErrNotExist) {
			return ""
		}
		missing = p
		if parent := filepath.Dir(p); parent == p {
			return missing
		}
	}
}

// Server is a running broker.
type Server struct {
	ns     *server.Server
	log    *slog.Logger
	unlock func() // releases the data dir
	once   sync.Once
}

// Start starts a broker and returns once it accepts connections. Options
// are checked before anything is created; a broker that cannot start (its
// port taken, its JetStream store unusable) fails at once with the
// broker's own reason, not after ReadyTimeout, and removes what it created
// (the data dir when it was new, else the lock file and JetStream store
// when they were); a store that existed is left as it was.
func Start(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, &switchboard.FieldError{Field: "data dir", Value: "", Reason: "the embedded broker needs a directory for its JetStream store"}
	}
	if opts.Port < -1 || opts.Port > 65535 {
		return nil, &switchboard.FieldError{Field: "port", Value: strconv.Itoa(opts.Port), Reason: "want 1 to 65535 (or -1 for any free port)"}
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// What this Start creates goes again if it fails: the directories
	// that did not exist, else the lock file and the JetStream store when
	// they are new. A store that was there before is never touched.
	created := firstMissing(opts.Dir)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		if created != "" {
			os.RemoveAll(created)
		}
		return nil, fmt.Errorf("embedded nats: data dir: %w", err)
	}
	var newPaths []string
	if created != "" {
		newPaths = []string{created}
	} else {
		for _, p := range []string{filepath.Join(opts.Dir, lockName), filepath.Join(opts.Dir, storeName)} {
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				newPaths = append(newPaths, p)
			}
		}
	}
	unlock, err := lockDir(opts.Dir)
	if err != nil {
		// Another broker holds the lock file: it is not ours to remove.
		if created != "" {
			os.RemoveAll(created)
		}
		return nil, err
	}
	started := false
	defer func() {
		if started {
			return
		}
		// Removed while the lock is still held, so no other broker is
		// using what goes.
		for _, p := range newPaths {
			if err := os.RemoveAll(p); err != nil {
				opts.Logger.Warn("embedded nats: cleaning up after a failed start", "path", p, "err", err)
			}
		}
		unlock()
	}()
	ns, err := server.NewServer(&server.Options{
		ServerName: "switchboard-embedded",
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.Dir,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	lg := &logger{l: opts.Logger}
	ns.SetLoggerV2(lg, false, false, false)
	where := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	if opts.Port == -1 {
		where = opts.Host + " (any free port)"
	}
	fail := func(err error) (*Server, error) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, err
	}
	// The broker reports what stops it starting (a listen error, JetStream
	// failing) through Fatalf and returns from Start, which would otherwise
	// exit the process: ours records it, so it is returned at once instead
	// of waiting out ReadyTimeout for a listener that will never come.
	ns.Start()
	if msg := lg.fatal(); msg != "" {
		return fail(fmt.Errorf("embedded nats on %s: %s", where, msg))
	}
	if !ns.ReadyForConnections(opts.ReadyTimeout) {
		if msg := lg.fatal(); msg != "" {
			return fail(fmt.Errorf("embedded nats on %s: %s", where, msg))
		}
		return fail(fmt.Errorf("embedded nats: not ready within %s on %s", opts.ReadyTimeout, where))
	}
	if !ns.JetStreamEnabled() {
		return fail(errors.New("embedded nats: JetStream did not start (is the data dir writable?)"))
	}
	opts.Logger.Info("embedded nats: serving", "url", ns.ClientURL(), "store", opts.Dir)
	started = true
	return &Server{ns: ns, log: opts.Logger, unlock: unlock}, nil
}

// ClientURL returns the URL clients connect to (nats://127.0.0.1:PORT).
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Addr returns the listening address.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops the broker, waits for it to end and releases its data
// dir. It is idempotent.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.once.Do(s.unlock)
}

// logger adapts the broker's logger to slog, and keeps the first fatal
// error (nats-server's own logger exits the process on it).
type logger struct {
	l *slog.Logger

	mu        sync.Mutex
	firstFail string
}

// fatal returns the first fatal error logged, or "".
func (g *logger) fatal() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.firstFail
}

func (g *logger) Noticef(format string, v ...any) {
	g.l.Debug("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Warnf(format string, v ...any) {
	g.l.Warn("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	// Start returns it as its error: logged at debug, so it is not told twice.
	g.l.Debug("embedded nats: " + msg)
	g.mu.Lock()
	if g.firstFail == "" {
		g.firstFail = msg
	}
	g.mu.Unlock()
}
func (g *logger) Errorf(format string, v ...any) {
	g.l.Error("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Debugf(format string, v ...any) {
	g.l.Debug("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Tracef(format string, v ...any) {
	g.l.Debug("embedded nats: " + fmt.Sprintf(format, v...))
}
