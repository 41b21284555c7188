package switchboard

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest sanitised name. The module SDK truncates
// resource names at 48 characters, and the subject, CR
// and lease names derived from a module name must equal the SDK's.
const MaxNameLen = 48

// SanitizeName turns a module or service name into an RFC 1123 label, exactly
// as the module SDK does: lowercase (Unicode case mapping, so the Kelvin sign
// becomes 'k'); every run of characters outside [a-z0-9] becomes one '-';
// leading and trailing '-' trimmed; at most MaxNameLen (48) characters,
// keeping the tail (the distinctive part of "github.com/org/some-module")
// when truncating, and trimming a '-' the cut leaves at the front.
// A name that sanitises to nothing is an ErrInvalidName.
func SanitizeName(name string) (string, error) {
	lower := strings.ToLower(name)
	var b strings.Builder
	b.Grow(len(lower))
	dash := false
	for i := 0; i < len(lower); i++ {
		c := lower[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteByte(c)
			continue
		}
		dash = true
	}
	s := b.String()
	if len(s) > MaxNameLen {
		s = strings.TrimLeft(s[len(s)-MaxNameLen:], "-")
	}
	if s == "" {
		return "", invalid(ErrInvalidName, "name", name, "must contain at least one letter or digit")
	}
	return s, nil
}

// IsSanitized reports whether name is already in its sanitised form.
func IsSanitized(name string) bool {
	s, err := SanitizeName(name)
	return err == nil && s == name
}

// NodeName is a parsed full node name, "<flow>.<module>.<node>", with an
// optional port: "<flow>.<module>.<node>:<port>". The node part may itself
// contain dots ("flow.module.node.sub"), as the TinySystems SDK allows.
type NodeName struct {
	Flow   string
	Module string
	Node   string
	Port   string
}

// String returns the full node name, with ":port" when Port is set.
func (n NodeName) String() string {
	s := n.Flow + "." + n.Module + "." + n.Node
	if n.Port != "" {
		s += ":" + n.Port
	}
	return s
}

// FullName returns "<flow>.<module>.<node>" without the port.
func (n NodeName) FullName() string {
	return n.Flow + "." + n.Module + "." + n.Node
}

// Limits of a full node name (ParseNodeName).
const (
	// MaxNodeNameLen bounds "<flow>.<module>.<node>", without the port:
	// the TinySystems SDK's full node name is the Kubernetes name of the
	// node's TinyNode resource (it creates it with the GenerateName
	// "<flow hash>.<module>.<component>-", and a TinySignal's node is
	// "the name of the TinyNode"), and a Kubernetes object name, a DNS
	// subdomain, is at most 253 characters. No SDK node name is longer.
	MaxNodeNameLen = 253
	// MaxPortLen bounds the port. Nothing on the wire bounds an SDK port
	// (a name a component declares in its code, such as "request" or
	// "_settings", sent in the x-to header and the gRPC To field): the
	// limit is a generous one, that of a Kubernetes name and of ids
	// (MaxTokenLen), so that a whole "<node>:<port>" is at most 507 bytes.
	MaxPortLen = MaxTokenLen
)

// ParseNodeName parses "<flow>.<module>.<node>[:<port>]" the way the
// TinySystems SDK reads it: the module is the second dot-separated part and
// everything after the second dot is the node, which may contain further
// dots ("flow.module.node.sub:port"). Flow, port and every dot-separated
// segment of the node are tokens of [A-Za-z0-9_-]; module must be a
// sanitised name. The name without the port is at most MaxNodeNameLen
// (253) bytes, the port at most MaxPortLen (253). The port is optional
// here; senders require it (see RequirePort).
func ParseNodeName(s string) (NodeName, error) {
	const field = "node name"
	if s == "" {
		return NodeName{}, invalid(ErrInvalidName, field, s, "is empty; want <flow>.<module>.<node>[:<port>]")
	}
	full, port, hasPort := strings.Cut(s, ":")
	if len(full) > MaxNodeNameLen {
		return NodeName{}, invalid(ErrInvalidName, field, s,
			fmt.Sprintf("<flow>.<module>.<node> is %d bytes; at most %d (a node name is a Kubernetes object name)", len(full), MaxNodeNameLen))
	}
	if len(port) > MaxPortLen {
		return NodeName{}, invalid(ErrInvalidName, field, s, fmt.Sprintf("port is %d bytes; at most %d", len(port), MaxPortLen))
	}
	if hasPort {
		if port == "" {
			return NodeName{}, invalid(ErrInvalidName, field, s, "has an empty port after ':'")
		}
		if !isToken(port) {
			return NodeName{}, invalid(ErrInvalidName, field, s, "port must be letters, digits, '_' or '-'")
		}
	}
	parts := strings.SplitN(full, ".", 3)
	if len(parts) != 3 {
		return NodeName{}, invalid(ErrInvalidName, field, s, "want at least three dot-separated parts <flow>.<module>.<node>")
	}
	n := NodeName{Flow: parts[0], Module: parts[1], Node: parts[2], Port: port}
	for _, p := range []struct{ what, v string }{{"flow", n.Flow}, {"module", n.Module}, {"node", n.Node}} {
		if p.v == "" {
			return NodeName{}, invalid(ErrInvalidName, field, s, p.what+" part is empty")
		}
	}
	if !isToken(n.Flow) {
		return NodeName{}, invalid(ErrInvalidName, field, s, "flow part must be letters, digits, '_' or '-'")
	}
	if !IsSanitized(n.Module) {
		return NodeName{}, invalid(ErrInvalidName, field, s, "module part must be a sanitised name (lowercase letters, digits and single '-')")
	}
	for seg := range strings.SplitSeq(n.Node, ".") {
		if seg == "" {
			return NodeName{}, invalid(ErrInvalidName, field, s, "node part has an empty segment between dots")
		}
		if !isToken(seg) {
			return NodeName{}, invalid(ErrInvalidName, field, s, "node part must be letters, digits, '_', '-' and inner dots")
		}
	}
	return n, nil
}

// RequirePort returns an ErrInvalidName error when n has no port: a message
// is always sent to a port ("<flow>.<module>.<node>:<port>"), as in the
// TinySystems SDK, whose receivers cannot deliver a message without one.
func (n NodeName) RequirePort() error {
	if n.Port == "" {
		return invalid(ErrInvalidName, "node name", n.String(), "has no port; sending needs <flow>.<module>.<node>:<port>")
	}
	return nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
