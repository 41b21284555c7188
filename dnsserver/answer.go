package dnsserver

import (
	"encoding/hex"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// Answer returns the reply to query r, as received over TCP (tcp) or UDP.
// It never fails: a query it cannot answer gets a reply saying why
// (FORMERR, NOTIMP, REFUSED, NXDOMAIN).
func (s *Server) Answer(r *dns.Msg, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Compress = true
	size := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		size = max(dns.MinMsgSize, min(int(opt.UDPSize()), dns.DefaultMsgSize))
		m.SetEdns0(dns.DefaultMsgSize, false)
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			return m
		}
	}
	if tcp {
		size = dns.MaxMsgSize
	}
	switch {
	case r.Response:
		m.Rcode = dns.RcodeFormatError
		return m
	case r.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
		return m
	case len(r.Question) != 1:
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m
	}
	name := lowerASCII(q.Name)
	rest, ok := strings.CutSuffix(name, s.zone)
	if !ok || (rest != "" && !strings.HasSuffix(rest, ".")) {
		m.Rcode = dns.RcodeRefused // not ours, and no recursion
		return m
	}
	m.Authoritative = true
	limit := s.opts.MaxRecords
	if tcp {
		limit = maxTCPRecords
	}
	a := answer{s: s, m: m, q: q, limit: limit}
	a.resolve(strings.TrimSuffix(rest, "."), q.Name[:len(rest)])
	if a.nx {
		m.Rcode = dns.RcodeNameError
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, s.soa)
	}
	m.Truncate(size)
	return m
}

// maxTCPRecords bounds the records of a TCP answer: more A records than
// fit in the largest message (about 4,000 of 16 bytes), so every record
// that fits is answered without building thousands that cannot be sent.
const maxTCPRecords = dns.MaxMsgSize / 16

// answer builds one reply.
type answer struct {
	s     *Server
	m     *dns.Msg
	q     dns.Question
	limit int  // most records
	nx    bool // the name does not exist
}

// resolve answers rest, the query's name without the zone and lower case
// (asked: the same as asked, for ids), or marks it NXDOMAIN.
func (a *answer) resolve(rest, asked string) {
	if rest == "" {
		a.apex()
		return
	}
	// The last three labels are all that any form but instance reads;
	// n counts them all.
	var last [3]string
	n := 0
	for r := rest; r != ""; n++ {
		i := strings.LastIndexByte(r, '.')
		if n < len(last) {
			last[n] = r[i+1:]
		}
		r = r[:max(i, 0)]
	}
	kind := last[0]
	labels := make3(n, last)
	switch {
	case labels.n == 1 && (kind == "service" || kind == "cap" || kind == "type" || kind == "instance" || kind == "addr"):
		// The parents of the names answered: they exist, with no records.
	case kind == "service" && labels.n == 2 && labels.l[0] == "_tcp":
		// The parent of the RFC 2782 names.
	case kind == "service" && labels.n == 2:
		a.group(labels.l[0], byName, false)
	case kind == "service" && labels.n == 3 && labels.l[1] == "_tcp" && strings.HasPrefix(labels.l[0], "_"):
		a.group(labels.l[0][1:], byName, true)
	case kind == "cap" && labels.n == 2:
		a.group(labels.l[0], byCap, false)
	case kind == "type" && labels.n == 2:
		a.group(labels.l[0], byType, false)
	case kind == "instance" && labels.n >= 2:
		a.instance(asked[:len(asked)-len(".instance.")])
	case kind == "addr" && labels.n == 2:
		a.addr(labels.l[0])
	default:
		a.nx = true
	}
}

// labels3 is up to the last three labels of a name, first to last, and
// how many labels it has in all.
type labels3 struct {
	l [3]string
	n int
}

// make3 returns the name's labels from last (its last ones, last first).
func make3(n int, last [3]string) labels3 {
	var out labels3
	out.n = n
	k := min(n, 3)
	for i := range k {
		out.l[i] = last[k-1-i]
	}
	return out
}

// apex answers the zone's own name: its SOA.
func (a *answer) apex() {
	if a.q.Qtype == dns.TypeSOA || a.q.Qtype == dns.TypeANY {
		a.m.Answer = append(a.m.Answer, a.s.soa)
	}
}

// A group is how the instances of one label are found.
type group int

const (
	byName group = iota
	byCap
	byType
)

// members returns the instances of a label in one version of the cache:
// those Serves accepts, as the cache's lookups answer only those.
func (a *answer) members(l string, g group) []switchboard.Instance {
	if l == "" || len(l) > switchboard.MaxNameLen {
		return nil
	}
	if g == byName {
		return a.s.idx.snapshot().ByName(l)
	}
	var buf [4]string
	var snap *discovery.Snapshot
	var raws []string
	list := (*discovery.Snapshot).ByCapability
	if g == byCap {
		snap, raws = a.s.idx.lookup(func(x *index) map[string]map[string]int { return x.caps }, l, buf[:0])
	} else {
		snap, raws = a.s.idx.lookup(func(x *index) map[string]map[string]int { return x.types }, l, buf[:0])
		list = (*discovery.Snapshot).ByType
	}
	switch len(raws) {
	case 0:
		return nil
	case 1:
		return list(snap, raws[0])
	}
	// Several capabilities sanitise to this label (a_b and a-b): their
	// instances, each once.
	var out []switchboard.Instance
	seen := map[string]bool{}
	for _, raw := range raws {
		for _, in := range list(snap, raw) {
			if !seen[in.ID] {
				seen[in.ID] = true
				out = append(out, in)
			}
		}
	}
	return out
}

// group answers a service, capability or type name, or (srvOnly) the
// RFC 2782 name of a service, which holds SRV records only (ANY answers
// them too). A name no instance is served under is NXDOMAIN.
func (a *answer) group(l string, g group, srvOnly bool) {
	list := a.members(l, g)
	if len(list) == 0 {
		a.nx = true
		return
	}
	qt := a.q.Qtype
	if srvOnly && qt == dns.TypeANY {
		qt = dns.TypeSRV
	}
	switch {
	case srvOnly && qt != dns.TypeSRV:
	case qt == dns.TypeA || qt == dns.TypeAAAA || qt == dns.TypeANY:
		var buf [8]target
		a.addresses(a.pick(list, func(t target) bool { return t.wants(a.q.Qtype) }, buf[:0]))
	case qt == dns.TypeSRV:
		var buf [8]target
		for _, in := range a.pick(list, func(t target) bool { return t.ip.IsValid() || t.host != "" }, buf[:0]) {
			a.srv(in)
		}
	}
}

// target is where an instance is reached: an IP address, or a host name,
// and a port; neither for a nats:// address. weight is its SRV weight.
type target struct {
	ip     netip.Addr
	host   string // fully qualified
	port   uint16
	weight uint16
}

// targetOf reads in's address and weight.
func targetOf(in *switchboard.Instance) target {
	if strings.HasPrefix(in.Address, "nats://") {
		return target{}
	}
	host, port, err := switchboard.SplitHostPort(in.Address)
	if err != nil {
		return target{}
	}
	if h, ok := strings.CutPrefix(host, "["); ok {
		host = strings.TrimSuffix(h, "]")
	}
	w := srvWeight(in)
	if ip, err := netip.ParseAddr(host); err == nil {
		return target{ip: ip.WithZone(""), port: uint16(port), weight: w}
	}
	if _, ok := dns.IsDomainName(host); !ok {
		return target{}
	}
	return target{host: dns.Fqdn(strings.ToLower(host)), port: uint16(port), weight: w}
}

// srvWeight is in's weight as an SRV record carries it: the weight itself
// (1 to MaxWeight, which fits in the field's 0 to 65535), so the shares
// are exactly the weights'. It is never 0, which RFC 2782 keeps for
// records to be chosen only rarely.
func srvWeight(in *switchboard.Instance) uint16 {
	return uint16(min(max(in.TrafficWeight(), 1), 65535))
}

// wants reports whether t has an address record of type qt (A, AAAA, or
// either for ANY).
func (t target) wants(qt uint16) bool {
	if !t.ip.IsValid() {
		return false
	}
	v4 := t.ip.Is4()
	return qt == dns.TypeANY || qt == dns.TypeA && v4 || qt == dns.TypeAAAA && !v4
}

// pick returns, in random order, at most limit of the instances of list
// whose targets ok accepts: a window of the list from a random place (so
// each is answered as often as the others), shuffled.
func (a *answer) pick(list []switchboard.Instance, ok func(target) bool, out []target) []target {
	n := len(list)
	if n == 0 {
		return nil
	}
	start := rand.IntN(n)
	for i := 0; i < n && len(out) < a.limit; i++ {
		if t := targetOf(&list[(start+i)%n]); ok(t) {
			out = append(out, t)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// addresses adds the A and AAAA records of ts under the question's name,
// made in one block.
func (a *answer) addresses(ts []target) {
	var v4, v6 int
	for _, t := range ts {
		if t.ip.Is4() {
			v4++
		} else {
			v6++
		}
	}
	as, aaaas := make([]dns.A, v4), make([]dns.AAAA, v6)
	ips := make([]byte, 0, 4*v4+16*v6)
	hdr := dns.RR_Header{Name: a.q.Name, Class: dns.ClassINET, Ttl: a.s.opts.TTL}
	a.m.Answer = slices.Grow(a.m.Answer, len(ts))
	for _, t := range ts {
		if t.ip.Is4() {
			b := t.ip.As4()
			ips = append(ips, b[:]...)
			r := &as[len(as)-v4]
			v4--
			r.Hdr, r.Hdr.Rrtype, r.A = hdr, dns.TypeA, ips[len(ips)-4:len(ips):len(ips)]
			a.m.Answer = append(a.m.Answer, r)
			continue
		}
		b := t.ip.As16()
		ips = append(ips, b[:]...)
		r := &aaaas[len(aaaas)-v6]
		v6--
		r.Hdr, r.Hdr.Rrtype, r.AAAA = hdr, dns.TypeAAAA, ips[len(ips)-16:len(ips):len(ips)]
		a.m.Answer = append(a.m.Answer, r)
	}
}

// address is the A or AAAA record of ip under name.
func (a *answer) address(name string, ip netip.Addr) dns.RR {
	hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: a.s.opts.TTL}
	if ip.Is4() {
		hdr.Rrtype = dns.TypeA
		return &dns.A{Hdr: hdr, A: ip.AsSlice()}
	}
	hdr.Rrtype = dns.TypeAAAA
	return &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()}
}

// srv adds t's SRV record, and the address of its target when it is an
// IP address (<hex>.addr.<zone>).
func (a *answer) srv(t target) {
	host := t.host
	if t.ip.IsValid() {
		host = hex.EncodeToString(t.ip.AsSlice()) + ".addr." + a.s.zone
		a.m.Extra = append(a.m.Extra, a.address(host, t.ip))
	}
	a.m.Answer = append(a.m.Answer, &dns.SRV{
		Hdr:      dns.RR_Header{Name: a.q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: a.s.opts.TTL},
		Priority: 1, Weight: t.weight, Port: t.port, Target: host,
	})
}

// instance answers <id>.instance: id as asked, then in lower case, then
// the ids with capitals that lower-case to it.
func (a *answer) instance(id string) {
	snap := a.s.idx.snapshot()
	in, ok := snap.Get(id)
	if !ok {
		lower := lowerASCII(id)
		if in, ok = snap.Get(lower); !ok {
			var buf [2]string
			var ids []string
			snap, ids = a.s.idx.lookup(func(x *index) map[string]map[string]int { return x.ids }, lower, buf[:0])
			for _, other := range ids {
				if in, ok = snap.Get(other); ok {
					break
				}
			}
		}
	}
	if !ok || !Serves(&in) {
		a.nx = true
		return
	}
	t := targetOf(&in)
	switch qt := a.q.Qtype; {
	case t.host != "" && (qt == dns.TypeA || qt == dns.TypeAAAA || qt == dns.TypeCNAME || qt == dns.TypeANY):
		a.m.Answer = append(a.m.Answer, &dns.CNAME{
			Hdr:    dns.RR_Header{Name: a.q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: a.s.opts.TTL},
			Target: t.host,
		})
	case t.wants(qt):
		a.m.Answer = append(a.m.Answer, a.address(a.q.Name, t.ip))
	case qt == dns.TypeSRV && (t.ip.IsValid() || t.host != ""):
		a.srv(t)
	}
}

// addr answers <hex>.addr: the IPv4 (8 hex digits) or IPv6 (32) address
// written there.
func (a *answer) addr(h string) {
	b, err := hex.DecodeString(h)
	ip, ok := netip.AddrFromSlice(b)
	if err != nil || !ok {
		a.nx = true
		return
	}
	if (target{ip: ip}).wants(a.q.Qtype) {
		a.m.Answer = append(a.m.Answer, a.address(a.q.Name, ip))
	}
}

// lowerASCII lower-cases the ASCII letters of s only, keeping its length
// (a name in presentation form is ASCII; anything else stays as it is).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
