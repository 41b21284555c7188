package natswire

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectOptions configure Connect: the connection's behaviour, and the
// credentials and TLS of a secured broker (see Validate for the rules).
// File options take paths; a leading "~/" is the home directory, as in
// nats.go and the nats CLI.
type ConnectOptions struct {
	// Name is the connection name the broker shows.
	Name string
	// ReconnectWait is the pause between reconnect attempts (default 250 ms).
	ReconnectWait time.Duration
	// Timeout bounds the first connection (default 2 s).
	Timeout time.Duration
	// Logger receives connection events (nil: slog.Default()).
	Logger *slog.Logger

	// CredsFile is a user credentials file: the user's JWT and nkey seed,
	// as nsc, the nats CLI and Synadia Cloud write them (the nats CLI's
	// --creds).
	CredsFile string
	// NkeySeedFile is a file holding a user nkey seed, "SU…" (the nats
	// CLI's --nkey).
	NkeySeedFile string
	// User and Password are credentials for the servers whose URL carries
	// none (a URL's own user:password@ wins, as in nats.go).
	User, Password string
	// Token is an authentication token, for the servers whose URL carries
	// none.
	Token string

	// TLSCA is a PEM file of the certificate authorities that sign the
	// servers' certificates (the nats CLI's --tlsca; default: the
	// system's).
	TLSCA string
	// TLSCert and TLSKey are the client certificate and its private key,
	// PEM files, set together (--tlscert, --tlskey).
	TLSCert, TLSKey string
	// TLSHandshakeFirst starts TLS before the server speaks, for servers
	// configured with handshake_first (--tlsfirst).
	TLSHandshakeFirst bool
}

// Connect connects to url — one server, or several comma-separated (a
// cluster: the client reconnects to any of them, and to the servers the
// cluster announces) — with unlimited reconnects, logging every disconnect
// and reconnect. The options are checked first (Validate), so a missing
// or unreadable file fails before any connection is tried. A failure to
// connect at start is returned (the caller falls back to gRPC, as the SDK
// does). Errors and logs never show a password, a token, a seed or a
// URL's credentials.
func Connect(url string, opts ConnectOptions) (*nats.Conn, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.ReconnectWait <= 0 {
		opts.ReconnectWait = 250 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Name == "" {
		opts.Name = "switchboard"
	}
	secure, err := opts.security()
	if err != nil {
		return nil, err
	}
	hide := func(s string) string { return opts.hide(s, url) }
	nopts := append([]nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.Timeout(opts.Timeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close, which is not news
				log.Warn("nats: disconnected", "err", hide(err.Error()))
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats: reconnected", "url", c.ConnectedUrlRedacted(), "server", c.ConnectedServerName())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			log.Warn("nats: async error", "subject", subj, "err", hide(err.Error()))
		}),
	}, secure...)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		why := hide(err.Error())
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) {
			why = fmt.Sprintf("the server refused the credentials (%s): %s", opts.describeCredentials(url), why)
		}
		return nil, redactedError{msg: fmt.Sprintf("nats: connect to %s: %s", redact(url), why), err: err}
	}
	return nc, nil
}

// redactedError is an error whose text has the credentials hidden; it
// still unwraps to the client's error (whose own text may show them).
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// urlPart is one server of a URL list, split around its credentials:
// head (leading spaces and the scheme), cred ("user:password", "token";
// empty when there are none) and tail (host, port, path).
type urlPart struct {
	head, cred, tail string
	hasCred          bool
}

// servers splits url, a comma-separated list of server URLs with or
// without schemes.
func servers(url string) []urlPart {
	var out []urlPart
	for _, u := range strings.Split(url, ",") {
		trimmed := strings.TrimLeft(u, " ")
		sv := urlPart{head: u[:len(u)-len(trimmed)]}
		u = strings.TrimRight(trimmed, " ")
		if sch, rest, ok := strings.Cut(u, "://"); ok {
			sv.head, u = sv.head+sch+"://", rest
		}
		if at := strings.LastIndex(u, "@"); at >= 0 {
			sv.cred, sv.hasCred, u = u[:at], true, u[at+1:]
		}
		sv.tail = u
		out = append(out, sv)
	}
	return out
}

// redact hides the credentials of every server in url (a comma-separated
// list, with or without schemes) for errors and logs.
func redact(url string) string {
	parts := make([]string, 0, strings.Count(url, ",")+1)
	for _, sv := range servers(url) {
		if sv.hasCred {
			sv.tail = "***@" + sv.tail
		}
		parts = append(parts, sv.head+sv.tail)
	}
	return strings.Join(parts, ",")
}

// redactText hides in s (a client's error text, which may quote the URL)
// the credentials of url.
func redactText(s, url string) string {
	for _, sv := range servers(url) {
		s = hideSecret(s, sv.cred)
	}
	return s
}

// redactText hides in s the credentials of url and the password and token
// of o.
func (o ConnectOptions) hide(s, url string) string {
	return hideSecret(hideSecret(redactText(s, url), o.Password), o.Token)
}

// hideSecret replaces secret in s, as is and as Go would quote it, with
// "***".
func hideSecret(s, secret string) string {
	if secret == "" {
		return s
	}
	q := strconv.Quote(secret)
	s = strings.ReplaceAll(s, secret, "***")
	return strings.ReplaceAll(s, q[1:len(q)-1], "***")
}

// describeCredentials says which credentials a connection to url
// presented, naming files and the user but never a secret.
func (o ConnectOptions) describeCredentials(url string) string {
	var what []string
	for _, sv := range servers(url) {
		if sv.hasCred {
			what = append(what, "the credentials in the URL")
			break
		}
	}
	switch {
	case o.CredsFile != "":
		what = append(what, "creds file "+o.CredsFile)
	case o.NkeySeedFile != "":
		what = append(what, "nkey seed file "+o.NkeySeedFile)
	case o.User != "":
		what = append(what, fmt.Sprintf("user %q and its password", o.User))
	case o.Token != "":
		what = append(what, "a token")
	}
	if o.TLSCert != "" {
		what = append(what, "client certificate "+o.TLSCert)
	}
	if len(what) == 0 {
		return "none were given, and the server requires them"
	}
	return strings.Join(what, ", ")
}
