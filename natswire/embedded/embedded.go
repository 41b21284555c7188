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
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchboard-io/switchboard"
)

// DefaultPort is the NATS client port.
const DefaultPort = 4222

// Options configure a broker.
type Options struct {
	// Dir is where JetStream stores streams (required; created if absent).
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

// Server is a running broker.
type Server struct {
	ns  *server.Server
	log *slog.Logger
}

// Start starts a broker and returns once it accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, &switchboard.FieldError{Field: "data dir", Value: "", Reason: "the embedded broker needs a directory for its JetStream store"}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded nats: data dir: %w", err)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.Port < -1 || opts.Port > 65535 {
		return nil, &switchboard.FieldError{Field: "port", Value: strconv.Itoa(opts.Port), Reason: "want 1 to 65535 (or -1 for any free port)"}
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
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
	ns.SetLoggerV2(&logger{l: opts.Logger}, false, false, false)
	ns.Start()
	if !ns.ReadyForConnections(opts.ReadyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready within %s on %s", opts.ReadyTimeout, net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		return nil, errors.New("embedded nats: JetStream did not start (is the data dir writable?)")
	}
	opts.Logger.Info("embedded nats: serving", "url", ns.ClientURL(), "store", opts.Dir)
	return &Server{ns: ns, log: opts.Logger}, nil
}

// ClientURL returns the URL clients connect to (nats://127.0.0.1:PORT).
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Addr returns the listening address.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops the broker and waits for it to end. It is idempotent.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// logger adapts the broker's logger to slog.
type logger struct{ l *slog.Logger }

func (g *logger) Noticef(format string, v ...any) {
	g.l.Debug("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Warnf(format string, v ...any) {
	g.l.Warn("embedded nats: " + fmt.Sprintf(format, v...))
}
func (g *logger) Fatalf(format string, v ...any) {
	g.l.Error("embedded nats: " + fmt.Sprintf(format, v...))
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
