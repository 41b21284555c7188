package postgres

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// Bulk reads (List, Snapshot) decode the rows of cols by hand from their
// binary wire format (rows.RawValues) instead of through pgx's Scan: per
// row, one allocation holds every string of the instance (id, name, type,
// address, version, capabilities, metadata keys and values), plus the
// capability slice and the metadata map, instead of one per field and
// pgx's per-column scan plans. The result is the Instance scanInstance
// gives for the same row (TestDecodeMatchesScan).

// binaryResults asks for every column of cols in binary format.
var binaryResults = pgx.QueryResultFormats{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}

// Binary wire constants: timestamptz counts microseconds from 2000-01-01
// UTC (the extremes are ±infinity); pgx converts an interval's days and
// months to 24 and 30×24 hours.
const (
	unixToY2KMicros  = 946_684_800 * 1_000_000
	microsPerDay     = 24 * 60 * 60 * 1_000_000
	microsPerMonth   = 30 * microsPerDay
	jsonbWireVersion = 1
)

var errWire = errors.New("unexpected wire format")

// digestSeed seeds this process's row digests: a digest is only ever
// compared with another of the same process (hub.Part.Digests).
var digestSeed = maphash.MakeSeed()

// rowDigest is a digest of one row of cols as received, all but its
// last_seen and stale columns (the traffic state included), never 0: what a resync compares instead of
// decoding the row (hub.Held). Each column is length-prefixed (NULL apart
// from empty), so that no two different rows run together alike.
func rowDigest(vals [][]byte) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var n [4]byte
	for i, v := range vals {
		if i == 10 || i == 11 { // last_seen, stale
			continue
		}
		l := uint32(len(v))
		if v == nil {
			l = ^uint32(0)
		}
		binary.BigEndian.PutUint32(n[:], l)
		h.Write(n[:])
		h.Write(v)
	}
	return h.Sum64() | 1
}

// decodeRow decodes one row of cols, read in binaryResults formats, into
// in. With it non-nil, identical capability lists and metadata share one
// slice and one map across the rows it decoded (read-only instances only:
// Snapshot's, which the hub shares with watchers as read-only anyway).
// Metadata in another form than this package writes is read as
// storedmeta.Read says and logged through ml (nil: not logged).
func decodeRow(vals [][]byte, in *switchboard.Instance, it *interner, ml *storedmeta.Log) error {
	if len(vals) != colCount {
		return fmt.Errorf("%w: %d columns", errWire, len(vals))
	}
	for i, v := range vals {
		if v == nil && i != 7 && i != 16 && i != 19 { // components, check_spec, health_since
			return fmt.Errorf("%w: column %d is NULL", errWire, i)
		}
	}
	caps, ncaps, capBytes, err := textArray(vals[4])
	if err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	md := vals[6]
	if len(md) == 0 || md[0] != jsonbWireVersion {
		return fmt.Errorf("metadata: %w", errWire)
	}
	md = md[1:]
	if string(md) == "{}" {
		md = nil
	}
	var sharedCaps []string
	var sharedMD map[string]string
	if it != nil {
		var ok bool
		if sharedCaps, ok = it.caps[string(vals[4])]; ok {
			ncaps, capBytes = 0, 0
		}
		if sharedMD, ok = it.maps[string(md)]; ok && md != nil {
			md = nil
		}
	}

	// One string for every text field of the row; the fields are slices of
	// it.
	var sb strings.Builder
	sb.Grow(len(vals[0]) + len(vals[1]) + len(vals[2]) + len(vals[3]) + len(vals[5]) + len(vals[14]) + len(vals[17]) +
		len(vals[18]) + capBytes + len(md))
	for _, i := range [...]int{0, 1, 2, 3, 5, 14, 17, 18} {
		sb.Write(vals[i])
	}
	if sharedCaps == nil {
		err = eachArrayElem(caps, ncaps, func(e []byte) { sb.Write(e) })
		if err != nil {
			return fmt.Errorf("capabilities: %w", err)
		}
	}
	sb.Write(md)
	all := sb.String()
	off := 0
	next := func(n int) string {
		s := all[off : off+n]
		off += n
		return s
	}
	in.ID = next(len(vals[0]))
	in.Name = next(len(vals[1]))
	in.Type = next(len(vals[2]))
	in.Address = next(len(vals[3]))
	in.Version = next(len(vals[5]))
	in.Zone = next(len(vals[14]))
	in.Health.Status = healthStatus(next(len(vals[17])))
	in.Health.Output = next(len(vals[18]))
	switch {
	case sharedCaps != nil:
		in.Capabilities = sharedCaps
	case ncaps == 0:
		in.Capabilities = []string{}
	default:
		in.Capabilities = make([]string, 0, ncaps)
		_ = eachArrayElem(caps, ncaps, func(e []byte) { in.Capabilities = append(in.Capabilities, next(len(e))) })
		it.keepCaps(vals[4], in.Capabilities)
	}
	in.Metadata = sharedMD
	if len(md) > 0 {
		in.Metadata = ml.Decode(in.ID, next(len(md)))
		it.keepMap(md, in.Metadata)
	}
	in.Components = nil
	if vals[7] != nil {
		in.Components = json.RawMessage(append([]byte(nil), vals[7]...))
	}
	if len(vals[8]) != 16 {
		return fmt.Errorf("ttl: %w", errWire)
	}
	us := int64(binary.BigEndian.Uint64(vals[8])) +
		int64(int32(binary.BigEndian.Uint32(vals[8][8:])))*microsPerDay +
		int64(int32(binary.BigEndian.Uint32(vals[8][12:])))*microsPerMonth
	in.TTL = readTTL(time.Duration(us) * time.Microsecond)
	if in.RegisteredAt, err = timestamptz(vals[9]); err != nil {
		return fmt.Errorf("registered_at: %w", err)
	}
	if in.LastSeen, err = timestamptz(vals[10]); err != nil {
		return fmt.Errorf("last_seen: %w", err)
	}
	if len(vals[11]) != 1 {
		return fmt.Errorf("stale: %w", errWire)
	}
	in.Stale = vals[11][0] != 0
	if len(vals[12]) != 8 {
		return fmt.Errorf("revision: %w", errWire)
	}
	in.Revision = int64(binary.BigEndian.Uint64(vals[12]))
	if len(vals[13]) != 4 {
		return fmt.Errorf("weight: %w", errWire)
	}
	in.Weight = int(int32(binary.BigEndian.Uint32(vals[13])))
	if len(vals[15]) != 1 {
		return fmt.Errorf("draining: %w", errWire)
	}
	in.Draining = vals[15][0] != 0
	in.Check = nil
	if spec := vals[16]; spec != nil {
		if len(spec) == 0 || spec[0] != jsonbWireVersion {
			return fmt.Errorf("check_spec: %w", errWire)
		}
		in.Check = backend.ReadCheck(in.ID, spec[1:], ml)
	}
	in.Health.Since = time.Time{}
	if vals[19] != nil {
		if in.Health.Since, err = timestamptz(vals[19]); err != nil {
			return fmt.Errorf("health_since: %w", err)
		}
	}
	return nil
}

// interner shares identical capability lists and metadata maps among the
// rows of one read. It keeps at most internMax of each: past that, rows
// get their own.
type interner struct {
	caps map[string][]string
	maps map[string]map[string]string
}

const internMax = 1 << 14

func newInterner() *interner {
	return &interner{caps: make(map[string][]string), maps: make(map[string]map[string]string)}
}

func (it *interner) keepCaps(raw []byte, caps []string) {
	if it != nil && len(it.caps) < internMax {
		it.caps[string(raw)] = caps
	}
}

func (it *interner) keepMap(raw []byte, m map[string]string) {
	if it != nil && len(it.maps) < internMax {
		it.maps[string(raw)] = m
	}
}

// timestamptz decodes a finite binary timestamptz, in UTC.
func timestamptz(v []byte) (time.Time, error) {
	if len(v) != 8 {
		return time.Time{}, errWire
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == 1<<63-1 || us == -1<<63 {
		return time.Time{}, fmt.Errorf("%w: infinite timestamp", errWire)
	}
	us += unixToY2KMicros
	return time.Unix(us/1_000_000, us%1_000_000*1_000).UTC(), nil
}

// textArray checks the header of a binary one-dimensional text[] without
// NULLs and returns its elements' part, their number and the total length
// of their contents.
func textArray(v []byte) (elems []byte, n, size int, err error) {
	if len(v) < 12 {
		return nil, 0, 0, errWire
	}
	ndim := binary.BigEndian.Uint32(v)
	if ndim == 0 {
		return nil, 0, 0, nil
	}
	if ndim != 1 || len(v) < 20 {
		return nil, 0, 0, fmt.Errorf("%w: %d-dimensional array", errWire, int32(ndim))
	}
	if binary.BigEndian.Uint32(v[4:]) != 0 {
		return nil, 0, 0, fmt.Errorf("%w: NULL in array", errWire)
	}
	n = int(int32(binary.BigEndian.Uint32(v[12:])))
	elems = v[20:]
	err = eachArrayElem(elems, n, func(e []byte) { size += len(e) })
	return elems, n, size, err
}

// eachArrayElem calls f with each of the n length-prefixed elements of b.
func eachArrayElem(b []byte, n int, f func([]byte)) error {
	for range n {
		if len(b) < 4 {
			return errWire
		}
		l := int(int32(binary.BigEndian.Uint32(b)))
		if l < 0 || len(b) < 4+l {
			return errWire
		}
		f(b[4 : 4+l])
		b = b[4+l:]
	}
	if len(b) != 0 {
		return errWire
	}
	return nil
}
