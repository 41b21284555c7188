package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzSecretMatches: a secret matches its own stored form (salted, and the
// bare SHA-256 of earlier releases) and no other secret's; any stored text,
// however malformed, is a mismatch, never a panic; two hashes of one secret
// differ (each has its own salt).
func FuzzSecretMatches(f *testing.F) {
	f.Add("a-secret-of-sixteen", "s1$$", "x")
	f.Add("another-secret-0000", "s1$!!!$abc", "")
	f.Add("x", "0000", "s1$AAAA")
	f.Fuzz(func(t *testing.T, secret, stored, other string) {
		secretMatches(stored, secret) // any stored form: no panic
		h := hashSecret(secret, "")
		if !secretMatches(h, secret) {
			t.Fatalf("%q does not match its own hash %q", secret, h)
		}
		if h2 := hashSecret(secret, ""); h2 == h {
			t.Fatalf("two hashes of %q are equal: no salt", secret)
		}
		sum := sha256.Sum256([]byte(secret))
		if !secretMatches(hex.EncodeToString(sum[:]), secret) {
			t.Fatalf("%q does not match its legacy hash", secret)
		}
		if other != secret && secretMatches(h, other) {
			t.Fatalf("%q matches the hash of %q", other, secret)
		}
		holder := strings.ReplaceAll(other, holderSep, "")
		if n, hash := splitHolder(holder + holderSep + h); n != holder || hash != h {
			t.Fatalf("splitHolder of %q: %q %q", holder, n, hash)
		}
		// A hash carrying a tag: the secret matches as before (the tag is
		// part of the salt), the tag reads back, a hash without one has none.
		tag := addressTag(other)
		tagged := hashSecret(secret, tag)
		if !secretMatches(tagged, secret) || secretTag(tagged) != tag || secretTag(h) != "" || secretTag(stored) != "" && !strings.HasPrefix(stored, saltedPrefix) {
			t.Fatalf("tag %q in the hash of %q: %q, read back %q", tag, secret, tagged, secretTag(tagged))
		}
		if other != secret && secretMatches(tagged, other) {
			t.Fatalf("%q matches the tagged hash of %q", other, secret)
		}
	})
}
