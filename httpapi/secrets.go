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
//
// After its 16 random bytes the salt carries the tag of the credential
// that registered the row or took the lease (credential.go), when there
// is one: the ownership the per-credential quotas count is stored in the
// one reserved place a row and a lease already have, a server of an
// earlier release still checks the secret (the whole salt is hashed, as
// it always was), and the tag cannot be changed in the database without
// the secret no longer matching.
const saltedPrefix = "s1$"

// saltRandom is the random part of a salt, before the tag.
const saltRandom = 16

// hashSecret returns the stored form of secret, with a new salt carrying
// tag ("" for none).
func hashSecret(secret, tag string) string {
	salt := make([]byte, saltRandom, saltRandom+len(tag))
	rand.Read(salt)
	salt = append(salt, tag...)
	return saltedPrefix + base64.RawURLEncoding.EncodeToString(salt) + "$" + saltedSum(salt, secret)
}

// secretTag returns the credential tag the stored form of a secret
// carries ("" for none: no tag, a bare SHA-256 of an earlier release, or
// anything malformed).
func secretTag(stored string) string {
	rest, ok := strings.CutPrefix(stored, saltedPrefix)
	if !ok {
		return ""
	}
	enc, _, _ := strings.Cut(rest, "$")
	salt, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(salt) <= saltRandom {
		return ""
	}
	return string(salt[saltRandom:])
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
