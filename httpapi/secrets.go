package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Secrets are stored as "s1$<salt>$<hash>": a random 16-byte salt of
// their own and the SHA-256 of salt and secret, both base64url. A reader
// of the database can neither look a secret up in a precomputed table nor
// test one guess against every row at once. Rows stored by earlier
// releases hold the bare hex SHA-256 of the secret, which is still read.
const saltedPrefix = "s1$"

// hashSecret returns the stored form of secret, with a new salt.
func hashSecret(secret string) string {
	var salt [16]byte
	rand.Read(salt[:])
	return saltedPrefix + base64.RawURLEncoding.EncodeToString(salt[:]) + "$" + saltedSum(salt[:], secret)
}

func saltedSum(salt []byte, secret string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// secretMatches reports whether secret is the one stored as stored (in
// either form), in time independent of where they differ.
func secretMatches(stored, secret string) bool {
	if rest, ok := strings.CutPrefix(stored, saltedPrefix); ok {
		enc, sum, ok := strings.Cut(rest, "$")
		salt, err := base64.RawURLEncoding.DecodeString(enc)
		if !ok || err != nil {
			return false
		}
		return subtle.ConstantTimeCompare([]byte(saltedSum(salt, secret)), []byte(sum)) == 1
	}
	legacy := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare([]byte(hex.EncodeToString(legacy[:])), []byte(stored)) == 1
}

func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validSecret bounds what a client may present as a secret.
func validSecret(s string) bool {
	if len(s) < 16 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
