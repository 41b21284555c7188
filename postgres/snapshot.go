package postgres

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// Snapshot's read of every row (readAll, which List uses too). The server
// scans the table in its physical order, with no sort: sorting 100,000
// rows by name and id took it longer than everything else together (the
// sort spilled to disk, or ran in parallel workers). The rows are received
// as they come, copied raw into large buffers, sorted here by name then id
// in byte order (the hub's order, which a collation's ORDER BY need not be,
// so the hub finds them in order and does not sort again), and only then
// decoded, by every core at once, each row into its place in the result.

// snapshotQuery reads every row for Snapshot, unsorted.
const snapshotQuery = `SELECT ` + cols + ` FROM instances`

// maxSizeHint bounds readOpts.sizeHint.
const maxSizeHint = 1 << 18

// rawChunk is the size of the buffers raw rows are copied into.
const rawChunk = 1 << 20

// rawRow is one received row: its values, length-prefixed as on the wire
// (-1: NULL), and the first 16 bytes of its name and id, zero-padded and
// big-endian, which order most pairs of rows without reading further.
// Text never holds a zero byte, so equal prefixes of values no longer than
// 16 bytes mean equal values.
type rawRow struct {
	rec            []byte
	name0, name1   uint64
	id0, id1       uint64
	nameLen, idLen int32
}

func prefix16(b []byte) (uint64, uint64) {
	var p [16]byte
	copy(p[:], b)
	return binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])
}

// field returns the value of column i of a raw record.
func (r *rawRow) field(i int) []byte {
	rec := r.rec
	for {
		l := int32(binary.BigEndian.Uint32(rec))
		rec = rec[4:]
		if i == 0 {
			if l < 0 {
				return nil
			}
			return rec[:l]
		}
		if l > 0 {
			rec = rec[l:]
		}
		i--
	}
}

// values splits a raw record into dst's columns.
func (r *rawRow) values(dst [][]byte) {
	rec := r.rec
	for i := range dst {
		l := int32(binary.BigEndian.Uint32(rec))
		rec = rec[4:]
		dst[i] = nil
		if l >= 0 {
			dst[i], rec = rec[:l:l], rec[l:]
		}
	}
}

func compareRaw(a, b rawRow) int {
	if c := cmp.Compare(a.name0, b.name0); c != 0 {
		return c
	}
	if c := cmp.Compare(a.name1, b.name1); c != 0 {
		return c
	}
	if a.nameLen > 16 || b.nameLen > 16 {
		if c := bytes.Compare(a.field(1), b.field(1)); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.id0, b.id0); c != 0 {
		return c
	}
	if c := cmp.Compare(a.id1, b.id1); c != 0 {
		return c
	}
	if a.idLen > 16 || b.idLen > 16 {
		return bytes.Compare(a.field(0), b.field(0))
	}
	return 0
}

// readOpts say how readAll returns the rows.
type readOpts struct {
	sizeHint int  // the expected number of rows
	sort     bool // by name then id (else in the order received)
	// share identical capability lists and metadata maps among the rows
	// (see interner): only for instances nobody modifies.
	share bool
	// md logs metadata in another form than this package writes (nil:
	// not logged).
	md *storedmeta.Log
}

// readAll reads every row of rows (a query of cols run with binaryResults)
// and returns them decoded: the rows are copied raw as they arrive, and
// decoded once all are in, straight into a result of the right size.
func readAll(rows pgx.Rows, o readOpts) ([]switchboard.Instance, error) {
	defer rows.Close()
	// The hint (the planner's row estimate) may be stale: it only sizes
	// the first allocation, never beyond maxSizeHint rows.
	raw := make([]rawRow, 0, min(max(o.sizeHint, 0), maxSizeHint)+64)
	var buf []byte
	chunk := rawChunk / 16
	for rows.Next() {
		vals := rows.RawValues()
		if len(vals) != colCount {
			return nil, errWire
		}
		need := 0
		for _, v := range vals {
			need += 4 + len(v)
		}
		if cap(buf)-len(buf) < need {
			buf = make([]byte, 0, max(chunk, need))
			chunk = min(2*chunk, rawChunk)
		}
		start := len(buf)
		for _, v := range vals {
			if v == nil {
				buf = binary.BigEndian.AppendUint32(buf, 1<<32-1)
				continue
			}
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
			buf = append(buf, v...)
		}
		r := rawRow{rec: buf[start:len(buf):len(buf)], nameLen: int32(len(vals[1])), idLen: int32(len(vals[0]))}
		if o.sort {
			r.name0, r.name1 = prefix16(vals[1])
			r.id0, r.id1 = prefix16(vals[0])
		}
		raw = append(raw, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if o.sort {
		slices.SortFunc(raw, compareRaw)
	}

	out := make([]switchboard.Instance, len(raw))
	workers := 1
	if len(raw) >= 4096 {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(raw)*w/workers, len(raw)*(w+1)/workers
		wg.Go(func() {
			var it *interner
			if o.share {
				it = newInterner()
			}
			var vals [colCount][]byte
			for i := lo; i < hi; i++ {
				raw[i].values(vals[:])
				if err := decodeRow(vals[:], &out[i], it, o.md); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
