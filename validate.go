package switchboard

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard/internal/millis"
)

// Limits enforced by Validate.
const (
	MaxCapabilityLen  = 63
	MaxMetadataKeys   = 64
	MaxMetadataKeyLen = 128
	MaxMetadataValue  = 1024
	MaxComponentsSize = 256 << 10
	MaxTokenLen       = 253 // type, version, id
	// MaxCapabilities bounds the capabilities of one instance.
	MaxCapabilities = 64
	// MaxHeartbeatIDs bounds the ids of one Heartbeat call (a process
	// renews all its registrations in one call).
	MaxHeartbeatIDs = 10000
	// MaxLeaseName and MaxLeaseHolder bound a lease's name and holder
	// identity (bytes).
	MaxLeaseName   = 253
	MaxLeaseHolder = 1024
)

// Normalize validates in and returns it in canonical form: the name
// sanitised, capabilities de-duplicated in their given order, the TTL
// rounded up to whole milliseconds. Everything a backend stores
// goes through it, so a bad field never reaches storage.
func Normalize(in Instance) (Instance, error) {
	out := in.Clone()
	name, err := SanitizeName(in.Name)
	if err != nil {
		return Instance{}, err
	}
	out.Name = name
	if in.ID != "" {
		if err := ValidateID(in.ID); err != nil {
			return Instance{}, err
		}
	}
	if in.Type == "" {
		return Instance{}, invalid(ErrInvalid, "type", "", "must not be empty")
	}
	if !isCapability(in.Type) {
		return Instance{}, invalid(ErrInvalid, "type", in.Type, tokenRule)
	}
	if err := ValidateAddress(in.Address); err != nil {
		return Instance{}, err
	}
	if len(in.Version) > MaxTokenLen || !utf8.ValidString(in.Version) || strings.ContainsAny(in.Version, "\x00\n\r") {
		return Instance{}, invalid(ErrInvalid, "version", in.Version, "must be at most 253 bytes of UTF-8 without NUL or line breaks")
	}
	if len(in.Capabilities) > MaxCapabilities {
		return Instance{}, invalid(ErrInvalid, "capabilities", "", fmt.Sprintf("%d given; at most %d", len(in.Capabilities), MaxCapabilities))
	}
	seen := make(map[string]bool, len(in.Capabilities))
	caps := make([]string, 0, len(in.Capabilities))
	for _, c := range in.Capabilities {
		if err := ValidateCapability(c); err != nil {
			return Instance{}, err
		}
		if !seen[c] {
			seen[c] = true
			caps = append(caps, c)
		}
	}
	out.Capabilities = caps
	if err := ValidateMetadata(in.Metadata); err != nil {
		return Instance{}, err
	}
	if len(in.Components) > 0 {
		if len(in.Components) > MaxComponentsSize {
			return Instance{}, invalid(ErrInvalid, "components", "", "larger than 256 KiB")
		}
		// json.Valid does not check the encoding of strings; PostgreSQL's
		// jsonb and every strict JSON reader reject invalid UTF-8.
		if !json.Valid(in.Components) || !utf8.Valid(in.Components) {
			return Instance{}, invalid(ErrInvalid, "components", "", "not valid UTF-8 JSON")
		}
	}
	if in.TTL < 0 {
		return Instance{}, invalid(ErrInvalid, "ttl", in.TTL.String(), "must not be negative")
	}
	if in.TTL != 0 && in.TTL < time.Millisecond {
		return Instance{}, invalid(ErrInvalid, "ttl", in.TTL.String(), "must be at least 1ms")
	}
	out.TTL = millis.Round(in.TTL)
	if err := validateTraffic(&out); err != nil {
		return Instance{}, err
	}
	return out, nil
}

// MinHeartbeatInterval is the shortest heartbeat interval (the config's
// heartbeat_interval, BootstrapOptions.HeartbeatInterval, the CLI's
// --heartbeat): a shorter one renews in a busy loop against the catalog, a
// write every few microseconds from each process. With heartbeats at most
// half the TTL, a heartbeating instance's TTL is at least twice this, 20ms
// (a row written with Catalog.Register alone may have a TTL down to 1ms).
const MinHeartbeatInterval = 10 * time.Millisecond

// ValidateHeartbeat checks a heartbeat interval against the TTL it keeps
// alive: at least MinHeartbeatInterval (10ms), and at most half the TTL: a
// missed heartbeat must not expire an instance, and a renewal later than
// 0.8 × TTL is logged as a revival (a change-log entry and a notification
// in every process). field names the interval as the caller knows it (a
// config key, an option, a flag). A TTL under twice MinHeartbeatInterval
// (20ms), which no interval fits, is reported first, as a "ttl" error: the
// TTL is what to fix, whatever the interval.
func ValidateHeartbeat(field string, interval, ttl time.Duration) error {
	if ttl < 2*MinHeartbeatInterval {
		return invalid(ErrInvalid, "ttl", ttl.String(),
			fmt.Sprintf("must be at least %s to be kept alive by heartbeats (each at least %s apart, at most half the ttl)", 2*MinHeartbeatInterval, MinHeartbeatInterval))
	}
	if err := checkInterval(field, interval); err != nil {
		return err
	}
	if interval > ttl/2 {
		return invalid(ErrInvalid, field, interval.String(),
			fmt.Sprintf("must be at most half the ttl (%s), so that one missed heartbeat does not expire the instance", ttl))
	}
	return nil
}

// checkInterval checks what a heartbeat interval must be whatever the TTL:
// positive and at least MinHeartbeatInterval.
func checkInterval(field string, interval time.Duration) error {
	if interval <= 0 {
		return invalid(ErrInvalid, field, interval.String(), "must be positive")
	}
	if interval < MinHeartbeatInterval {
		return invalid(ErrInvalid, field, interval.String(),
			fmt.Sprintf("must be at least %s: a shorter interval renews in a busy loop against the catalog", MinHeartbeatInterval))
	}
	return nil
}

// ValidateLease checks a lease's name (1–253 bytes) and holder (1–1024
// bytes), both UTF-8 without NUL: the same input must be valid on every
// backend, and no request may store an unbounded identity.
func ValidateLease(name, holder string) error {
	for _, x := range []struct {
		field, v string
		max      int
	}{{"lease name", name, MaxLeaseName}, {"lease holder", holder, MaxLeaseHolder}} {
		switch {
		case x.v == "":
			return invalid(ErrInvalid, x.field, "", "must not be empty")
		case len(x.v) > x.max:
			return invalid(ErrInvalid, x.field, x.v, fmt.Sprintf("%d bytes; at most %d", len(x.v), x.max))
		case !utf8.ValidString(x.v) || strings.IndexByte(x.v, 0) >= 0:
			return invalid(ErrInvalid, x.field, "", "must be UTF-8 without NUL")
		}
	}
	return nil
}

// ValidateID checks a caller-given instance id: 1–253 bytes of
// [A-Za-z0-9_.:-].
func ValidateID(id string) error {
	if id == "" || len(id) > MaxTokenLen {
		return invalid(ErrInvalid, "id", id, "must be 1 to 253 characters")
	}
	for i := 0; i < len(id); i++ {
		if !isCapByte(id[i]) {
			return invalid(ErrInvalid, "id", id, "must contain only letters, digits, '_', '.', ':' or '-'")
		}
	}
	return nil
}

// ValidateCapability checks one capability token:
// [A-Za-z0-9][A-Za-z0-9_.:-]{0,62}.
func ValidateCapability(c string) error {
	if !isCapability(c) {
		return invalid(ErrInvalid, "capability", c, tokenRule)
	}
	return nil
}

// tokenRule is what isCapability accepts, as an error says it: a type, a
// capability and a zone are such tokens.
const tokenRule = "must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,62}"

func isCapability(c string) bool {
	if c == "" || len(c) > MaxCapabilityLen {
		return false
	}
	if !isAlnum(c[0]) {
		return false
	}
	for i := 1; i < len(c); i++ {
		if !isCapByte(c[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func isCapByte(c byte) bool {
	return isAlnum(c) || c == '_' || c == '.' || c == ':' || c == '-'
}

// ValidateMetadata checks the metadata limits: at most 64 keys, keys 1–128
// bytes, values at most 1 KiB, all valid UTF-8 without NUL (which
// PostgreSQL cannot store: the same input must be valid on every backend).
func ValidateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return invalid(ErrInvalid, "metadata", "", "more than 64 keys")
	}
	for k, v := range md {
		if k == "" || len(k) > MaxMetadataKeyLen || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return invalid(ErrInvalid, "metadata key", k, "must be 1 to 128 bytes of UTF-8 without NUL")
		}
		if len(v) > MaxMetadataValue || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return invalid(ErrInvalid, "metadata value for "+k, "", "must be at most 1 KiB of UTF-8 without NUL")
		}
	}
	return nil
}

// ValidateAddress accepts "host:port" (IPv4, DNS name, or bracketed IPv6;
// port 1–65535) or "nats://<subject>".
func ValidateAddress(addr string) error {
	const field = "address"
	if addr == "" {
		return invalid(ErrInvalidAddress, field, addr, "must not be empty; want host:port or nats://subject")
	}
	if subj, ok := strings.CutPrefix(addr, "nats://"); ok {
		if !validSubject(subj) {
			return invalid(ErrInvalidAddress, field, addr, "nats subject must be dot-separated tokens without spaces or wildcards")
		}
		return nil
	}
	if strings.Contains(addr, "://") {
		return invalid(ErrInvalidAddress, field, addr, "only the nats:// scheme is allowed; otherwise give host:port")
	}
	host, _, err := SplitHostPort(addr)
	if err != nil {
		return err
	}
	if strings.HasPrefix(host, "[") {
		ip, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !ip.Is6() {
			return invalid(ErrInvalidAddress, field, addr, "bracketed host must be an IPv6 address")
		}
		if z := ip.Zone(); z != "" && !validZone(z) {
			return invalid(ErrInvalidAddress, field, addr, "IPv6 zone must be an interface name or index (letters, digits, '_', '.', '-')")
		}
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Is6() {
			return invalid(ErrInvalidAddress, field, addr, "IPv6 host must be in brackets, e.g. [::1]:8080")
		}
		return nil
	}
	if !validDNSName(host) {
		return invalid(ErrInvalidAddress, field, addr, "host must be an IPv4 address, a DNS name or a bracketed IPv6 address")
	}
	return nil
}

// SplitHostPort splits "host:port" on its last colon, keeping IPv6 brackets
// on the host, and checks that the port is 1–65535.
func SplitHostPort(addr string) (host string, port int, err error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, invalid(ErrInvalidAddress, "address", addr, "missing port; want host:port")
	}
	host, ps := addr[:i], addr[i+1:]
	if host == "" {
		return "", 0, invalid(ErrInvalidAddress, "address", addr, "missing host; want host:port")
	}
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") || (!strings.HasPrefix(host, "[") && strings.Contains(host, ":")) {
		return "", 0, invalid(ErrInvalidAddress, "address", addr, "IPv6 host must be in brackets, e.g. [::1]:8080")
	}
	p, perr := strconv.Atoi(ps)
	if perr != nil || p < 1 || p > 65535 || ps[0] == '+' || ps[0] == '0' {
		return "", 0, invalid(ErrInvalidAddress, "address", addr, "port must be a number from 1 to 65535")
	}
	return host, p, nil
}

// IsDialable reports whether addr is a host:port the gRPC pool may dial
// (nats:// subjects and anything invalid are not).
func IsDialable(addr string) bool {
	return !strings.HasPrefix(addr, "nats://") && ValidateAddress(addr) == nil
}

// validZone accepts the zone of a link-local IPv6 address: an interface
// name or index. netip accepts any bytes there, including ']' and ' ',
// which no dialer can parse back out of "[addr%zone]:port".
func validZone(z string) bool {
	for i := 0; i < len(z); i++ {
		if c := z[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func validDNSName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	// An all-numeric last label makes the name an IPv4 address to resolvers
	// (inet_aton reads "123" as 0.0.0.123 and "01.2.3.4" as octal); one that
	// is not a valid IPv4 address is a typo, not a host name (RFC 3696 §2).
	if allDigits(labels[len(labels)-1]) {
		return false
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !isAlnum(c) && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func validSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if c <= ' ' || c == 0x7f || c == '*' || c == '>' {
				return false
			}
		}
	}
	return utf8.ValidString(s)
}

// ParseDuration parses a positive Go duration ("3s", "250ms") and says which
// field is wrong when it is not.
func ParseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, invalid(ErrInvalid, field, s, "must not be empty; want a duration like 3s or 250ms")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if durationSyntax.MatchString(s) {
			// Well-formed, but past what a time.Duration holds.
			return 0, invalid(ErrInvalid, field, s, "too long; at most 2562047h47m16.854775807s (about 292 years)")
		}
		return 0, invalid(ErrInvalid, field, s, "not a duration; want a number with a unit, like 3s or 250ms")
	}
	if d <= 0 {
		return 0, invalid(ErrInvalid, field, s, "must be positive")
	}
	return d, nil
}

// durationSyntax is the grammar of time.ParseDuration: what it refuses
// although it matches is out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$`)
