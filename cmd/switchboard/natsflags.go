package main

import (
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/natswire"
)

// natsFlags are the NATS connection flags of `echo` and `send`; they
// override the [nats] keys. Passwords and tokens have no flag (a command
// line is visible to every user of the machine): they come from the
// configuration file, the environment or the URL.
type natsFlags struct {
	creds, nkey, user, ca, cert, key string
	tlsFirst                         bool
	replicas                         int
}

func (f *natsFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.creds, "nats-creds", "", "NATS user credentials file, .creds (default from config: nats.creds)")
	fs.StringVar(&f.nkey, "nats-nkey", "", "file holding a NATS user nkey seed (default from config: nats.nkey)")
	fs.StringVar(&f.user, "nats-user", "", "NATS user; its password comes from nats.password or SWITCHBOARD_NATS_PASSWORD (default from config: nats.user)")
	fs.StringVar(&f.ca, "nats-tls-ca", "", "PEM CA file that signs the NATS servers' certificates (default from config: nats.tls_ca)")
	fs.StringVar(&f.cert, "nats-tls-cert", "", "PEM client certificate for NATS servers that verify clients (default from config: nats.tls_cert)")
	fs.StringVar(&f.key, "nats-tls-key", "", "PEM key of --nats-tls-cert (default from config: nats.tls_key)")
	fs.BoolVar(&f.tlsFirst, "nats-tls-first", false, "start TLS before the NATS server speaks, for servers with handshake_first (default from config: nats.tls_first)")
	fs.IntVar(&f.replicas, "nats-stream-replicas", 0, "servers of a JetStream cluster keeping each stream the durable wire creates, 1 to 5 (default from config: nats.stream_replicas, 1)")
	for flag, key := range map[string]string{"nats-creds": "nats.creds", "nats-nkey": "nats.nkey", "nats-user": "nats.user",
		"nats-tls-ca": "nats.tls_ca", "nats-tls-cert": "nats.tls_cert", "nats-tls-key": "nats.tls_key",
		"nats-tls-first": "nats.tls_first", "nats-stream-replicas": "nats.stream_replicas"} {
		bindKey(fs, flag, key)
	}
}

// apply is a config override: set flags win over the file and environment.
func (f *natsFlags) apply(c *config.Config) {
	for _, x := range []struct{ v, dst *string }{{&f.creds, &c.NATS.Creds}, {&f.nkey, &c.NATS.Nkey}, {&f.user, &c.NATS.User},
		{&f.ca, &c.NATS.TLSCA}, {&f.cert, &c.NATS.TLSCert}, {&f.key, &c.NATS.TLSKey}} {
		if *x.v != "" {
			*x.dst = *x.v
		}
	}
	if f.tlsFirst {
		c.NATS.TLSFirst = true
	}
	if f.replicas != 0 {
		c.NATS.StreamReplicas = f.replicas
	}
}

// natsConnectOptions returns the NATS connection options of c's [nats]
// keys, checked before any connection: a file that is missing or of the
// wrong kind, or credentials of two kinds, is a usage error naming the
// setting that gave it (the flag, the environment variable, the file's
// key) and never a secret.
func (g *globals) natsConnectOptions(c config.Config) (natswire.ConnectOptions, error) {
	n := c.NATS
	o := natswire.ConnectOptions{Name: "switchboard-cli", Logger: g.log,
		CredsFile: n.Creds, NkeySeedFile: n.Nkey, User: n.User, Password: n.Password, Token: n.Token,
		TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey, TLSHandshakeFirst: n.TLSFirst}
	if err := o.Validate(); err != nil {
		return o, usage(g.nameSource(c, err))
	}
	return o, nil
}
