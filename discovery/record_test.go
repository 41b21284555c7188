package discovery

import (
	"testing"
	"time"
	"unsafe"

	"github.com/switchboard-io/switchboard"
)

// A record is one cache line: a random pick reads one line of it, never
// two.
func TestRecordIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n != 64 {
		t.Fatalf("a record is %d bytes, not 64", n)
	}
}

// Every time comes back from a record as it went in: instant and location,
// the zero time, and times outside the nanosecond range (kept in the shape).
func TestRecordKeepsEveryTime(t *testing.T) {
	zone := time.FixedZone("x", 5*3600+1800)
	times := []time.Time{
		{},
		time.Time{}.In(zone),
		time.Unix(1_764_590_000, 123_456_789).UTC(),
		time.Unix(1_764_590_000, 123_456_789).In(time.Local),
		time.Unix(1_764_590_000, 999_999_999).In(zone),
		time.Unix(-1, 1).UTC(),
		time.Date(1600, 1, 1, 0, 0, 0, 7, time.UTC),
		time.Date(3000, 6, 1, 12, 0, 0, 0, zone),
		time.Unix(0, 0).Add(time.Duration(1<<63 - 1)).UTC(),
		time.Unix(0, -1<<63+2).UTC(),
	}
	it := newInterner()
	for i, reg := range times {
		seen := times[len(times)-1-i]
		in := switchboard.Instance{ID: "a", Name: "n", Type: "t", Address: "x:1", RegisteredAt: reg, LastSeen: seen}
		got := it.acquire(&in).instance()
		for _, c := range []struct {
			what      string
			got, want time.Time
		}{{"RegisteredAt", got.RegisteredAt, reg}, {"LastSeen", got.LastSeen, seen}} {
			if !c.got.Equal(c.want) || c.got.Location() != c.want.Location() || c.got != c.want {
				t.Errorf("%s %v (%s) came back as %v (%s)", c.what, c.want, c.want.Location(), c.got, c.got.Location())
			}
		}
	}
}
