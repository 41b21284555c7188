package sqlite

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/jsonfast"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// The packed form of a row: what a List or a snapshot returns of it but
// its last_seen and components, as one JSON array in the packed column
// (migration 5):
//
//	[id, name, type, address, capabilities, version, metadata, ttl_ms, registered_at]
//
// with capabilities and metadata embedded as JSON, not as strings. Reading
// one column instead of nine is most of what a large read saves: the
// driver pays for every column of every row (a lock of the connection and
// a copy per value), which cost more than the B-tree walk itself.
//
// Every write of those columns keeps packed up to date: this package's
// statements set it, and triggers (migration 5) set it after any other
// insert or update that leaves it as it was (a program built before
// migration 5, the sqlite3 shell). A NULL packed is computed at read time.

// packSQL is the packed form of the row the columns of alias name.
func packSQL(alias string) string {
	return `json_array(` + alias + `.id, ` + alias + `.name, ` + alias + `.type, ` + alias + `.address, json(` +
		alias + `.capabilities), ` + alias + `.version, json(` + alias + `.metadata), ` + alias + `.ttl_ms, ` +
		alias + `.registered_at)`
}

// packedCols are the columns scanPacked reads: the packed form, last_seen,
// components, revision and the traffic state.
var packedCols = `coalesce(i.packed, ` + packSQL("i") + `), i.last_seen, i.components, i.revision, ` + trafficCols

// packedRow is a row as packedCols read it.
type packedRow struct {
	packed     string
	lastSeen   int64
	components sql.NullString
	revision   int64
	traffic
}

func (p *packedRow) dest() []any {
	return append([]any{&p.packed, &p.lastSeen, &p.components, &p.revision}, p.traffic.dest()...)
}

// decode fills in from p; now (µs, catalog clock) decides Stale. Metadata
// in another form than this package writes is read as
// storedmeta.Read says, a check as backend.ReadCheck says, and either is
// logged through ml (nil: not logged).
func (p *packedRow) decode(in *switchboard.Instance, sh *sharer, ml *storedmeta.Log, now int64) error {
	var ttlMS, registeredAt int64
	if err := unpack(p.packed, in, sh, ml, &ttlMS, &registeredAt); err != nil {
		return fmt.Errorf("instance %q: packed row: %w", in.ID, err)
	}
	in.TTL = time.Duration(ttlMS) * time.Millisecond
	in.RegisteredAt = time.UnixMicro(registeredAt).UTC()
	in.LastSeen = time.UnixMicro(p.lastSeen).UTC()
	in.Stale = now-p.lastSeen > ttlMS*1000
	in.Revision = p.revision
	in.Components = nil
	if p.components.Valid {
		in.Components = json.RawMessage(p.components.String)
	}
	p.traffic.decode(in, ml)
	return nil
}

// digestSeed seeds this process's row digests: a digest is only ever
// compared with another of the same process (hub.Part.Digests).
var digestSeed = maphash.MakeSeed()

// digest is a digest of everything p holds but last_seen (its packed form,
// components and revision), never 0: what a resync compares instead of
// decoding the row (hub.Held).
func (p *packedRow) digest() uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var rev [8]byte
	binary.LittleEndian.PutUint64(rev[:], uint64(p.revision))
	h.Write(rev[:])
	h.WriteString(p.packed)
	if p.components.Valid {
		h.WriteByte(1)
		h.WriteString(p.components.String)
	}
	t := &p.traffic
	var n [8]byte
	for _, v := range [...]int64{t.weight, int64(len(t.zone)), b2i(t.draining), int64(len(t.check.String)), b2i(t.check.Valid),
		int64(len(t.healthStatus)), int64(len(t.healthOutput)), t.healthSince.Int64, b2i(t.healthSince.Valid)} {
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	h.WriteString(t.zone)
	h.WriteString(t.check.String)
	h.WriteString(t.healthStatus)
	h.WriteString(t.healthOutput)
	return h.Sum64() | 1
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// packedID returns the id at the head of the packed array s, without
// decoding the rest.
func packedID(s string) (string, bool) {
	i, ok := expect(s, 0, '[')
	if !ok {
		return "", false
	}
	id, _, err := jsonfast.String(s, i)
	return id, err == nil
}

var errPacked = errors.New("not a packed row")

// unpack decodes the packed array s into in (all but its times,
// components and staleness). The strings of in share s's memory; with sh,
// its capabilities and metadata may be shared with other instances.
// Metadata another tool wrote in another form than an object of strings
// is read, not refused (see storedmeta.Log).
func unpack(s string, in *switchboard.Instance, sh *sharer, ml *storedmeta.Log, ttlMS, registeredAt *int64) error {
	i, ok := expect(s, 0, '[')
	if !ok {
		return errPacked
	}
	var err error
	strs := [...]*string{&in.ID, &in.Name, &in.Type, &in.Address}
	for _, p := range strs {
		if *p, i, err = jsonfast.String(s, i); err != nil {
			return err
		}
		if i, ok = expect(s, i, ','); !ok {
			return errPacked
		}
	}
	end := skipValue(s, i)
	if end < 0 {
		return errPacked
	}
	if in.Capabilities, err = sh.strings(s[i:end]); err != nil {
		return err
	}
	if i, ok = expect(s, end, ','); !ok {
		return errPacked
	}
	if in.Version, i, err = jsonfast.String(s, i); err != nil {
		return err
	}
	if i, ok = expect(s, i, ','); !ok {
		return errPacked
	}
	if end = skipValue(s, i); end < 0 {
		return errPacked
	}
	in.Metadata = sh.stringMap(s[i:end], ml, in.ID)
	if i, ok = expect(s, end, ','); !ok {
		return errPacked
	}
	if *ttlMS, i, err = jsonInt(s, i); err != nil {
		return err
	}
	if i, ok = expect(s, i, ','); !ok {
		return errPacked
	}
	if *registeredAt, i, err = jsonInt(s, i); err != nil {
		return err
	}
	if i, ok = expect(s, i, ']'); !ok || i != len(s) {
		return errPacked
	}
	return nil
}

// expect passes white space and then c at s[i:], and returns the index
// after it.
func expect(s string, i int, c byte) (int, bool) {
	i = jsonfast.Space(s, i)
	if i < len(s) && s[i] == c {
		return jsonfast.Space(s, i+1), true
	}
	return 0, false
}

// jsonInt reads the integer at s[i:].
func jsonInt(s string, i int) (int64, int, error) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(s[i:j], 10, 64)
	if err != nil {
		return 0, 0, errPacked
	}
	return v, j, nil
}

// skipValue returns the index after the JSON value (an array, object,
// string, number or literal) at s[i:], or -1.
func skipValue(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"':
			for j++; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth < 0 {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	if depth == 0 {
		return len(s)
	}
	return -1
}

// sharerMax bounds the distinct forms a sharer keeps of each kind: a
// catalog whose every row differs costs a bounded map, not a second copy.
const sharerMax = 4096

// sharer decodes each distinct capabilities or metadata form once, for
// instances that are only read (the hub's snapshot): a fleet's replicas
// mostly carry the same ones, and a map per row was the largest part of
// decoding. A nil sharer decodes every form anew (List, whose caller owns
// what it gets).
type sharer struct {
	caps map[string][]string
	md   map[string]map[string]string
}

func newSharer() *sharer {
	return &sharer{caps: map[string][]string{}, md: map[string]map[string]string{}}
}

func (sh *sharer) strings(s string) ([]string, error) {
	if sh == nil {
		return jsonfast.Strings(s)
	}
	return shared(sh.caps, s, jsonfast.Strings)
}

// stringMap decodes the metadata s of instance id (see storedmeta.Log).
func (sh *sharer) stringMap(s string, ml *storedmeta.Log, id string) map[string]string {
	if sh == nil {
		return ml.Decode(id, s)
	}
	if v, ok := sh.md[s]; ok {
		return v
	}
	v := ml.Decode(id, s)
	if len(sh.md) < sharerMax {
		sh.md[s] = v
	}
	return v
}

// shared returns the decoded form of s kept in m, decoding and keeping it
// (while m holds fewer than sharerMax) the first time.
func shared[V any](m map[string]V, s string, decode func(string) (V, error)) (V, error) {
	if v, ok := m[s]; ok {
		return v, nil
	}
	v, err := decode(s)
	if err == nil && len(m) < sharerMax {
		m[s] = v
	}
	return v, err
}
