package main

// The PEM files of the configuration (serve's [http] certificate and key,
// the module wire's [transport] certificate, key and CA), read before they
// are used so that a file that cannot be read or parsed is an error about
// the one key that named it: nameSource then names that key as the user set
// it (the flag, the environment variable, the config file's key).

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/switchboard-io/switchboard"
)

// tlsFile is a PEM file named by a key of the configuration.
type tlsFile struct{ key, path string }

// fault is a *switchboard.FieldError on the file's key. The error shows at
// most 80 bytes of a value, so a longer path (a mounted Kubernetes secret's)
// is given whole in the reason too: the file's name is at its end.
func (f tlsFile) fault(reason string) *switchboard.FieldError {
	if len(f.path) > 80 {
		reason += " (file " + f.path + ")"
	}
	return &switchboard.FieldError{Field: f.key, Value: f.path, Reason: reason}
}

// read reads the file; an error is a *switchboard.FieldError on its key.
func (f tlsFile) read() ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the error's value
		}
		return nil, f.fault("cannot be read: " + err.Error())
	}
	return b, nil
}

// loadKeyPair loads a certificate (chain) and its private key. An error is
// a *switchboard.FieldError on the file at fault: one that cannot be read,
// the certificate when it holds no certificate that parses, else the key
// (it holds no private key, or not the certificate's).
func loadKeyPair(cert, key tlsFile) (tls.Certificate, error) {
	certPEM, err := cert.read()
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := key.read()
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil {
		return pair, nil
	}
	if reason := certificateProblem(certPEM); reason != "" {
		return tls.Certificate{}, cert.fault(reason)
	}
	return tls.Certificate{}, key.fault(fmt.Sprintf("is not the PEM private key of the certificate %s: %v", cert.path, err))
}

// certificateProblem says what is wrong with a certificate file for
// tls.X509KeyPair, which takes the first CERTIFICATE block as the
// certificate; "" when that block parses.
func certificateProblem(b []byte) string {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return "holds no PEM certificate"
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return "holds a certificate that does not parse: " + err.Error()
		}
		return ""
	}
}

// checkCA checks that a CA bundle can be read and holds a PEM certificate.
func checkCA(ca tlsFile) error {
	b, err := ca.read()
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return ca.fault("holds no PEM certificate")
	}
	return nil
}
