package httpapi

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
)

// A credential is who a request acts as, for the per-credential quotas
// (Options.MaxInstancesPerToken, MaxLeasesPerToken, MaxWatchersPerToken):
// the client token it carries (Options.Token or one of Options.Tokens),
// or, for a request without a token on a server that lets such requests
// in, its IP address. The admin token is no such credential: what it
// does counts to no per-credential quota (the global ones still apply).
//
// What a credential owns is stored with it, as the credential's tag: in
// the salt of the secret's stored form (secrets.go), which an instance
// keeps under its reserved metadata key and a lease in its holder column
// (leases.go). The tag is derived from the credential alone, so every
// server on the same database, and the same server after a restart,
// derives the same one and counts the same rows; the token itself is
// never stored.
//
//   - A token's tag is "t1." and 16 bytes of PBKDF2-HMAC-SHA-256 of the
//     token (tagIterations rounds, a fixed salt), base64url: a reader of
//     the database who wants to test guesses of a token pays those rounds
//     for each guess (a token of random bytes is out of reach of any).
//   - An address's tag is "a1." and 16 bytes of the SHA-256 of the
//     address: an address is no secret, the tag only keeps it out of
//     sight in the rows.
//
// Rows and leases stored without a tag (by the administrator, by earlier
// releases, or directly on the backend) count to nobody.

// tagIterations is the PBKDF2 rounds of a token's tag: computed once per
// token and server (tokenTags), never per request.
const tagIterations = 10_000

// tagSalt is the fixed salt of tokens' tags: a tag must be the same on
// every server, so no server can choose one of its own.
var tagSalt = []byte("switchboard credential tag v1")

// tagLen is the length of every tag ("t1." or "a1." and 22 characters).
const tagLen = 3 + 22

func tokenTag(token string) string {
	k, err := pbkdf2.Key(sha256.New, token, tagSalt, tagIterations, 16)
	if err != nil {
		// Only a key length out of range fails, and 16 bytes is not; were
		// it to, a plain digest still tells tokens apart.
		sum := sha256.Sum256(append(append([]byte{}, tagSalt...), token...))
		k = sum[:16]
	}
	return "t1." + base64.RawURLEncoding.EncodeToString(k)
}

func addressTag(ip string) string {
	sum := sha256.Sum256([]byte("switchboard address tag v1\x00" + ip))
	return "a1." + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// tokenTags derives the tags of the server's client tokens, each once,
// on its first use.
type tokenTags struct {
	tokens []string
	once   []sync.Once
	tags   []string
}

func newTokenTags(tokens []string) *tokenTags {
	return &tokenTags{tokens: tokens, once: make([]sync.Once, len(tokens)), tags: make([]string, len(tokens))}
}

func (t *tokenTags) tag(i int) string {
	t.once[i].Do(func() { t.tags[i] = tokenTag(t.tokens[i]) })
	return t.tags[i]
}

// credential is what a request's per-credential quotas count against.
type credential struct {
	// tag is stored with what the request registers or acquires; "" for
	// the administrator, whose rows and leases count to nobody.
	tag string
	// what names the credential in a refusal: "this token" or "this
	// address (…)".
	what string
}

// exempt reports whether no per-credential quota applies (the admin).
func (c credential) exempt() bool { return c.tag == "" }

// credentialOf returns r's credential: its client token's, its address's
// when it carries none, nobody's for the administrator.
func (s *Server) credentialOf(r *http.Request) credential {
	c := callerOf(r)
	switch {
	case c.role == roleAdmin:
		return credential{}
	case c.token >= 0:
		return credential{tag: s.tags.tag(c.token), what: "this token"}
	}
	ip := remoteIP(r)
	return credential{tag: addressTag(ip), what: "this address (" + ip + ")"}
}

// remoteIP is r's client address without its port.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
