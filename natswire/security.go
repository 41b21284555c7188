package natswire

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/switchboard-io/switchboard"
)

// The names ConnectOptions' fields go by in errors: the keys of the
// [nats] section of the configuration file.
const (
	fieldCreds    = "nats.creds"
	fieldNkey     = "nats.nkey"
	fieldUser     = "nats.user"
	fieldPassword = "nats.password"
	fieldToken    = "nats.token"
	fieldTLSCA    = "nats.tls_ca"
	fieldTLSCert  = "nats.tls_cert"
	fieldTLSKey   = "nats.tls_key"
)

// Validate checks the credentials and TLS options without connecting: at
// most one kind of credentials (a creds file, an nkey seed file, a user
// with a password, or a token); a password only with a user; TLSCert and
// TLSKey together; and every file readable and of its kind — a creds file
// holding a user JWT and the nkey seed of that same user, an nkey seed
// file holding a user seed, PEM certificates in TLSCA and TLSCert, a
// private key in TLSKey that matches TLSCert. Errors are
// *switchboard.FieldError values naming the option and the file, never
// what the file holds, a password or a token. Connect calls it first.
func (o ConnectOptions) Validate() error {
	_, err := o.security()
	return err
}

// security validates the options and returns the nats.go options of the
// credentials and TLS they configure.
func (o ConnectOptions) security() ([]nats.Option, error) {
	var out []nats.Option
	kinds := 0
	for _, set := range []bool{o.CredsFile != "", o.NkeySeedFile != "", o.User != "" || o.Password != "", o.Token != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, &switchboard.FieldError{Field: "nats credentials", Reason: fmt.Sprintf("%s are set: give one kind (a creds file, an nkey seed file, user and password, or a token)", o.kinds())}
	}
	switch {
	case o.CredsFile != "":
		path, err := checkCreds(o.CredsFile)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.UserCredentials(path))
	case o.NkeySeedFile != "":
		path, err := checkSeedFile(o.NkeySeedFile)
		if err != nil {
			return nil, err
		}
		opt, err := nats.NkeyOptionFromSeed(path)
		if err != nil {
			return nil, &switchboard.FieldError{Field: fieldNkey, Value: o.NkeySeedFile, Reason: "not a user nkey seed file"}
		}
		out = append(out, opt)
	case o.Password != "" && o.User == "":
		return nil, &switchboard.FieldError{Field: fieldPassword, Reason: "is set without a user (" + fieldUser + ")"}
	case o.User != "":
		out = append(out, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		if strings.TrimSpace(o.Token) != o.Token {
			return nil, &switchboard.FieldError{Field: fieldToken, Reason: "has leading or trailing white space (a token file's final newline?)"}
		}
		out = append(out, nats.Token(o.Token))
	}
	tlsOpts, err := o.tlsOptions()
	if err != nil {
		return nil, err
	}
	return append(out, tlsOpts...), nil
}

// kinds names the kinds of credentials set, for the error that refuses
// several.
func (o ConnectOptions) kinds() string {
	var k []string
	if o.CredsFile != "" {
		k = append(k, fieldCreds)
	}
	if o.NkeySeedFile != "" {
		k = append(k, fieldNkey)
	}
	if o.User != "" || o.Password != "" {
		k = append(k, fieldUser+"/"+fieldPassword)
	}
	if o.Token != "" {
		k = append(k, fieldToken)
	}
	return strings.Join(k, " and ")
}

// tlsOptions returns nats.Secure with the CA, client certificate and key
// loaded (and TLSHandshakeFirst when asked), or nothing when no TLS option
// is set (a tls:// URL then uses the system's CAs).
func (o ConnectOptions) tlsOptions() ([]nats.Option, error) {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		field, value, missing := fieldTLSCert, o.TLSCert, fieldTLSKey
		if o.TLSCert == "" {
			field, value, missing = fieldTLSKey, o.TLSKey, fieldTLSCert
		}
		return nil, &switchboard.FieldError{Field: field, Value: value, Reason: missing + " is not set; the client certificate and its key go together"}
	}
	if o.TLSCA == "" && o.TLSCert == "" && !o.TLSHandshakeFirst {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSCA != "" {
		pem, err := readFile(fieldTLSCA, o.TLSCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &switchboard.FieldError{Field: fieldTLSCA, Value: o.TLSCA, Reason: "holds no PEM certificate (want the CA certificates, -----BEGIN CERTIFICATE-----)"}
		}
		cfg.RootCAs = pool
	}
	if o.TLSCert != "" {
		certPEM, err := readFile(fieldTLSCert, o.TLSCert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readFile(fieldTLSKey, o.TLSKey)
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(certPEM, []byte("-----BEGIN CERTIFICATE-----")) {
			return nil, &switchboard.FieldError{Field: fieldTLSCert, Value: o.TLSCert, Reason: "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"}
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		clear(keyPEM)
		if err != nil {
			return nil, &switchboard.FieldError{Field: fieldTLSKey, Value: o.TLSKey, Reason: "is not a PEM private key matching the certificate in " + o.TLSCert + ": " + err.Error()}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	out := []nats.Option{nats.Secure(cfg)}
	if o.TLSHandshakeFirst {
		out = append(out, nats.TLSHandshakeFirst())
	}
	return out, nil
}

// checkCreds checks that the creds file at path holds a user JWT and the
// nkey seed of the same user, and returns the path with "~/" expanded.
func checkCreds(path string) (string, error) {
	full, contents, err := readPath(fieldCreds, path)
	if err != nil {
		return "", err
	}
	defer clear(contents)
	bad := func(reason string) (string, error) {
		return "", &switchboard.FieldError{Field: fieldCreds, Value: path, Reason: reason}
	}
	tok, err := nkeys.ParseDecoratedJWT(contents)
	if err != nil {
		return bad("holds no user JWT (want a .creds file as nsc or the nats CLI write it)")
	}
	sub, ok := jwtUser(tok)
	if !ok {
		return bad("holds no user JWT (want a .creds file as nsc or the nats CLI write it)")
	}
	kp, err := nkeys.ParseDecoratedUserNKey(contents)
	if err != nil {
		return bad("holds no user nkey seed (want a .creds file as nsc or the nats CLI write it)")
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return bad("holds an unusable nkey seed")
	}
	if pub != sub {
		return bad(fmt.Sprintf("its JWT is for user %s but its seed is the key of %s", sub, pub))
	}
	return full, nil
}

// jwtUser returns the subject of a user JWT (a user's public nkey, "U…"),
// reading its claims without checking the signature (the server does).
func jwtUser(tok string) (string, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var claims struct {
		Sub  string `json:"sub"`
		NATS struct {
			Type string `json:"type"`
		} `json:"nats"`
	}
	if json.Unmarshal(payload, &claims) != nil || !nkeys.IsValidPublicUserKey(claims.Sub) || claims.NATS.Type != "user" {
		return "", false
	}
	return claims.Sub, true
}

// checkSeedFile checks that the file at path holds a user nkey seed, and
// returns the path with "~/" expanded.
func checkSeedFile(path string) (string, error) {
	full, contents, err := readPath(fieldNkey, path)
	if err != nil {
		return "", err
	}
	defer clear(contents)
	kp, err := nkeys.ParseDecoratedUserNKey(contents)
	if err != nil {
		return "", &switchboard.FieldError{Field: fieldNkey, Value: path, Reason: "holds no user nkey seed (want a line SU…, as nsc and nk write it)"}
	}
	kp.Wipe()
	return full, nil
}

// readFile reads the file of option field at path ("~/" expanded).
func readFile(field, path string) ([]byte, error) {
	_, b, err := readPath(field, path)
	return b, err
}

func readPath(field, path string) (string, []byte, error) {
	full, err := expandHome(path)
	if err != nil {
		return "", nil, &switchboard.FieldError{Field: field, Value: path, Reason: err.Error()}
	}
	b, err := os.ReadFile(full)
	if err != nil {
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
		return "", nil, &switchboard.FieldError{Field: field, Value: path, Reason: "cannot read it: " + why}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", nil, &switchboard.FieldError{Field: field, Value: path, Reason: "is empty"}
	}
	return full, b, nil
}

// expandHome turns a leading "~/" (or a bare "~") into the home directory.
func expandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot expand ~: %v", err)
	}
	return filepath.Join(home, path[1:]), nil
}
