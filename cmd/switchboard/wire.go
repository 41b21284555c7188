package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/tracing"
)

// tlsFlags are the module wire's TLS flags of `echo` and `send`; they
// override [transport] tls_cert, tls_key and tls_ca.
type tlsFlags struct{ cert, key, ca string }

func (f *tlsFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "PEM certificate of this side of the module wire (default from config: transport.tls_cert)")
	fs.StringVar(&f.key, "tls-key", "", "PEM key of --tls-cert (default from config: transport.tls_key)")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA bundle that signs the peers' certificates; servers then require client certificates (default from config: transport.tls_ca)")
	bindKey(fs, "tls-cert", "transport.tls_cert")
	bindKey(fs, "tls-key", "transport.tls_key")
	bindKey(fs, "tls-ca", "transport.tls_ca")
}

// apply is a config override: set flags win over the file and environment.
func (f *tlsFlags) apply(c *config.Config) {
	for _, x := range []struct{ v, dst *string }{{&f.cert, &c.Transport.TLSCert}, {&f.key, &c.Transport.TLSKey}, {&f.ca, &c.Transport.TLSCA}} {
		if *x.v != "" {
			*x.dst = *x.v
		}
	}
}

// wireTLS loads the configured TLS material of the module wire; nil means
// plaintext. A file that cannot be used is a usage error that names the
// setting that gave its path as the user set it (--tls-cert, the
// environment variable, the config file's key).
func (g *globals) wireTLS(c config.Config) (*grpcwire.TLS, error) {
	f := grpcwire.TLSFiles{Cert: c.Transport.TLSCert, Key: c.Transport.TLSKey, CA: c.Transport.TLSCA}
	if f.IsZero() {
		return nil, nil
	}
	t, err := grpcwire.NewTLS(f)
	if err == nil {
		return t, nil
	}
	// grpcwire names only the files: checked again file by file, for an
	// error that names the setting at fault.
	if f.Cert != "" && f.Key != "" {
		if _, ferr := loadKeyPair(tlsFile{"transport.tls_cert", f.Cert}, tlsFile{"transport.tls_key", f.Key}); ferr != nil {
			return nil, usage(g.nameSource(c, ferr))
		}
	}
	if f.CA != "" {
		if ferr := checkCA(tlsFile{"transport.tls_ca", f.CA}); ferr != nil {
			return nil, usage(g.nameSource(c, ferr))
		}
	}
	return nil, usage(err)
}

// setupTracing reads the OTEL_* environment for a command (spans are
// exported when it says so; verbose: real trace ids even without an
// exporter) before the command opens anything, so a bad environment is a
// usage error that leaves nothing behind. done flushes the spans.
func (g *globals) setupTracing(ctx context.Context, service string, verbose bool) (tr *tracing.Tracing, done func(), err error) {
	tr, err = tracing.Setup(ctx, service, tracing.Options{IDsWithoutExporter: verbose})
	if err != nil {
		return nil, nil, usage(err)
	}
	return tr, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			g.log.Warn("tracing: flushing spans failed", "err", err)
		}
	}, nil
}

// traced runs fn under a root span when tracing is on (tr from
// setupTracing), handing it the tracer provider to instrument with (nil:
// off), and with verbose prints the trace id to stderr whatever fn
// returned.
func (g *globals) traced(ctx context.Context, tr *tracing.Tracing, span string, verbose bool, fn func(context.Context, trace.TracerProvider) error) error {
	tp := tr.Provider()
	if tp == nil {
		return fn(ctx, nil)
	}
	ctx, s := tp.Tracer("github.com/switchboard-io/switchboard/cmd/switchboard").Start(ctx, span)
	err := fn(ctx, tp)
	s.End()
	if verbose {
		fmt.Fprintf(g.stderr, "trace_id %s\n", s.SpanContext().TraceID())
	}
	return err
}
