package hub

import (
	"strings"
	"testing"
	"time"
)

// FuzzParsePosition: any text a client sends as a position (an SSE
// Last-Event-ID reaches WatchFrom) parses without a panic, and every
// position the hub makes parses back to what it was made of.
func FuzzParsePosition(f *testing.F) {
	f.Add(int64(12), "e1/2/3/1", int64(11), int64(1733450000000000), "svc-1:a.b_c")
	f.Add(int64(0), "", int64(0), int64(0), "")
	f.Add(int64(5), "x@y", int64(3), int64(-1), "id,with,commas")
	f.Fuzz(func(t *testing.T, seq int64, epoch string, mseq, us int64, id string) {
		parsePosition(epoch) // arbitrary text
		if seq < 0 || mseq < 0 {
			return
		}
		m := Mark{Seq: mseq, At: time.UnixMicro(us).UTC(), ID: id}
		if mseq == 0 || id == "" {
			m = Mark{}
		}
		p := formatPosition(seq, epoch, m)
		gs, ge, gm, ok := parsePosition(p)
		if strings.Contains(epoch, "#") {
			return // epochs never hold '#' (SQLite: a number; PostgreSQL: hex, digits and '/')
		}
		if !ok || gs != seq || ge != epoch || gm.Seq != m.Seq || gm.ID != m.ID || !gm.At.Equal(m.At) {
			t.Fatalf("%q parsed as %d %q %+v %v, made of %d %q %+v", p, gs, ge, gm, ok, seq, epoch, m)
		}
	})
}
