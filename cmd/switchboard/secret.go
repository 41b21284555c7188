package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/httpapi/schema"
	"github.com/switchboard-io/switchboard/remote"
)

// envSecret is the environment variable of --secret.
const envSecret = "SWITCHBOARD_INSTANCE_SECRET"

const envSecretHelp = envSecret + "  instance secret over a server DSN (--secret wins)"

// addSecretFlag adds --secret to a command that names one instance
// (register, deregister): over a server DSN the instance's secret, which
// the server requires of anyone but the client that registered it.
func (g *globals) addSecretFlag(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVar(&g.secret, "secret", "", usage)
}

// instanceSecret is --secret, else SWITCHBOARD_INSTANCE_SECRET, checked
// against the configured DSN c: a secret only means something to a server
// (http://, https://), so --secret with another DSN is a usage error (the
// variable is then ignored: it may be set for other commands).
func (g *globals) instanceSecret(cmd *cobra.Command, c config.Config) (string, error) {
	typed := cmd.Flags().Changed("secret")
	s := g.secret
	if !typed {
		s = g.env(envSecret)
	}
	if s == "" {
		return "", nil
	}
	field := "--secret"
	if !typed {
		field = envSecret
	}
	if d, err := switchboard.ParseDSN(c.Discovery.DSN); err == nil && d.Scheme != "http" && d.Scheme != "https" {
		if !typed {
			return "", nil
		}
		return "", usage(&switchboard.FieldError{Field: field, Value: "(hidden)",
			Reason: "instance secrets belong to a switchboard server: use it with --dsn http://… or https://… (a catalog opened directly has none)"})
	}
	if len(s) < 16 || len(s) > 256 || strings.IndexFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return "", usage(&switchboard.FieldError{Field: field, Value: "(hidden)", Reason: "must be 16 to 256 printable ASCII characters, without spaces"})
	}
	return s, nil
}

// secretTransport sends secret as the instance secret of the requests that
// register, drain, undrain or delete one instance and carry none of their
// own (the client has one only for the rows it registered itself).
type secretTransport struct {
	base   http.RoundTripper
	secret string
}

func (t *secretTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get(schema.SecretHeader) == "" && r.Method != http.MethodGet &&
		strings.Contains(r.URL.Path, "/v1/instances") && !strings.HasSuffix(r.URL.Path, "/heartbeat") {
		r = r.Clone(r.Context())
		r.Header.Set(schema.SecretHeader, t.secret)
	}
	return t.base.RoundTrip(r)
}

// onInstance runs op on the catalog for the instance id (a deregistration,
// a drain), where naming the catalog: a bad id is a usage error, a missing
// row says there is no such id, and a refusal for want of the instance's
// secret is explained (ownerError).
func (g *globals) onInstance(ctx context.Context, id string, op func(cat switchboard.Catalog, where string) error) error {
	if err := switchboard.ValidateID(id); err != nil {
		return usage(err)
	}
	c, cat, err := g.existingCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	where := switchboard.RedactDSN(c.Discovery.DSN)
	switch err := op(cat, where); {
	case errors.Is(err, switchboard.ErrNotFound):
		return fmt.Errorf("no instance with id %q in %s", id, where)
	case err != nil:
		return ownerError(err, id, where, g.secret != "" || g.env(envSecret) != "")
	}
	return nil
}

// ownerError explains an operation on one instance the server refused for
// want of the instance's secret, naming the ways to do it; other errors
// are returned as they are.
func ownerError(err error, id, server string, sent bool) error {
	var ae *remote.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Error(), "secret") {
		return err
	}
	switch {
	case errors.Is(err, remote.ErrForbidden):
		return fmt.Errorf("wrong secret for instance %q at %s (--secret or %s)", id, server, envSecret)
	case errors.Is(err, remote.ErrUnauthorized) && !sent:
		return fmt.Errorf("instance %q was registered at %s by another client, which holds its secret: pass it with --secret or %s "+
			"(register --secret chooses it), use the server's admin token as SWITCHBOARD_HTTP_TOKEN, or stop that client (it deregisters as it exits)",
			id, server, envSecret)
	}
	return err
}
