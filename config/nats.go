package config

import (
	"strconv"

	"github.com/switchboard-io/switchboard"
)

// NATS is the [nats] section: how the commands that connect to a NATS
// broker (echo, send, and modules on the NATS wire; not the embedded
// broker of `switchboard nats` or `serve --nats`) authenticate and secure
// the connection, and how many replicas the JetStream streams get. The
// names follow the nats CLI's (--creds, --nkey, --user, --password,
// --tlsca, --tlscert, --tlskey, --tlsfirst). The servers are
// [transport] nats_url; credentials in that URL win over these.
type NATS struct {
	// Creds is a user credentials file (.creds: the user's JWT and nkey
	// seed, as nsc, the nats CLI and Synadia Cloud write it), for
	// operator-mode servers.
	Creds string `toml:"creds"`
	// Nkey is a file holding a user nkey seed (SU…).
	Nkey string `toml:"nkey"`
	// User and Password authenticate a user of the server's
	// configuration. Only one kind of credentials may be set: creds,
	// nkey, user and password, or token.
	User     string `toml:"user"`
	Password string `toml:"password"`
	// Token is an authentication token.
	Token string `toml:"token"`
	// TLSCA is the PEM file of the authorities that sign the servers'
	// certificates (default: the system's). Any TLS key makes the
	// connection TLS, as a tls:// URL does.
	TLSCA string `toml:"tls_ca"`
	// TLSCert and TLSKey are the client certificate and its key (PEM),
	// for servers that verify clients. Both or neither.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// TLSFirst starts TLS before the server speaks, for servers
	// configured with handshake_first.
	TLSFirst bool `toml:"tls_first"`
	// StreamReplicas is how many servers of a JetStream cluster keep
	// each stream the durable wire creates (1 to 5; default 1, as the
	// SDK's; 3 survives the loss of any one server).
	StreamReplicas int `toml:"stream_replicas"`
}

// DefaultStreamReplicas is the default [nats] stream_replicas.
const DefaultStreamReplicas = 1

// validate checks the [nats] keys that need no file: stream_replicas
// from 1 to 5, a password only with a user, tls_cert and tls_key
// together. The files are checked by the commands that connect, before
// they do.
func (n NATS) validate() error {
	if n.StreamReplicas < 1 || n.StreamReplicas > 5 {
		return &switchboard.FieldError{Field: "nats.stream_replicas", Value: strconv.Itoa(n.StreamReplicas), Reason: "must be 1 to 5 (servers keeping each stream)"}
	}
	if n.Password != "" && n.User == "" {
		return &switchboard.FieldError{Field: "nats.password", Reason: "is set without nats.user"}
	}
	return tlsPair("nats", n.TLSCert, n.TLSKey, "the client certificate and its key")
}
