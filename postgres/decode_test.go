package postgres

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// TestDecodeMatchesScan checks that the hand decoding of List and Snapshot
// gives, row for row, what pgx's Scan gives (scanInstance), for rows that
// exercise every column: no capabilities or many, metadata empty, escaped
// or not ASCII, components present or not, TTLs with days and months,
// stale rows, names and ids longer than the sort's 16-byte prefixes, a
// row larger than readAll's buffers, metadata another tool wrote in
// another form (values that are not strings, null, not an object), and the
// traffic state: weights, zones, draining, checks (and one another tool
// wrote that does not read as a check), health with and without a time.
func TestDecodeMatchesScan(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	exec(t, conn, `INSERT INTO instances (id, name, type, address, capabilities, version, metadata, components, ttl, registered_at, last_seen) VALUES
		('a', 'svc', 'writer', '10.0.0.1:1', '{}', '', '{}', NULL, '10 minutes 1 second', now(), now()),
		('b', 'svc', 'reader', '10.0.0.1:2', '{x,y,"with space","ünï"}', '1.2.3', '{"k": "v", "q\"uote": "line\nbreak", "ü": "ß"}',
			'{"b": 1, "a": [true, null]}', '1 day 2 hours 3.000004 seconds', now() - interval '1 hour', now() - interval '3 days'),
		('c-a-rather-long-instance-identifier-0001', 'a-service-name-longer-than-sixteen', 'writer', 'h:3', '{z}', 'v', '{"zone": "a"}', '[]', '2 months', now(), now()),
		('c-a-rather-long-instance-identifier-0000', 'a-service-name-longer-than-sixteen', 'writer', 'h:4', '{z}', 'v', '{"zone": "a"}', NULL, '5 minutes', now(), now()),
		('d', 'a-service-name-longer-than-sixteeo', 'writer', 'h:5', '{z}', 'v', '{"zone": "a"}', NULL, '5 minutes', now(), now()),
		('e', 'a-service-name-longer-than-sixtee', 'writer', 'h:6', '{z}', 'v', '{"zone": "b"}', NULL, '5 minutes', now(), now()),
		('f', '', 'writer', 'h:7', '{}', '', '{}', NULL, '1 microsecond', now(), now()),
		('g', 'big', 'writer', 'h:8', '{}', '', '{}', ('["'||repeat('x', 3 << 20)||'"]')::json, '1 hour', now(), now()),
		('h', 'odd', 'writer', 'h:9', '{}', '', '{"k": 1, "n": null, "o": {"a": [1, "b"]}, "zone": "a"}', NULL, '1 hour', now(), now()),
		('i', 'odd', 'writer', 'h:9', '{}', '', '[1, 2]', NULL, '1 hour', now(), now()),
		('j', 'odd', 'writer', 'h:9', '{}', '', 'null', NULL, '1 hour', now(), now())`)
	exec(t, conn, `INSERT INTO instances (id, name, type, address, ttl, weight, zone, draining, check_spec, health_status, health_output, health_since) VALUES
		('k', 'traffic', 'writer', 'h:10', '1 hour', 1, 'eu-west-1a', true, NULL, '', '', NULL),
		('l', 'traffic', 'writer', 'h:10', '1 hour', 10000, '', false,
			'{"target": "http://h:10/health", "interval": "10s", "timeout": "5s", "failures": 3, "successes": 1, "deregister_after": "5m0s"}',
			'critical', 'not checked yet', now() - interval '1 minute'),
		('m', 'traffic', 'writer', 'h:10', '1 hour', 300, 'z', true,
			'{"target": "grpc://h:10/pkg.Svc", "interval": "1h0m0s", "timeout": "1.5s", "failures": 100, "successes": 7, "body": "ü", "deregister_after": "1000h0m0s"}',
			'warning', 'HTTP 429 — ünïcode', now()),
		('n', 'traffic', 'writer', 'h:10', '1 hour', 100, '', false, '{"interval": 5}', 'passing', '', now()),
		('o', 'traffic', 'writer', 'h:10', '1 hour', 100, '', false, '[]', 'bogus', 'x', NULL)`)

	rows, err := conn.Query(ctx, `SELECT `+cols+` FROM instances ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var want []switchboard.Instance
	for rows.Next() {
		in, err := scanInstance(rows, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, in)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	for _, o := range []readOpts{{}, {sort: true, share: true}, {sort: true, sizeHint: 1}} {
		rows, err := conn.Query(ctx, `SELECT `+cols+` FROM instances ORDER BY id`, binaryResults)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(rows, o)
		if err != nil {
			t.Fatal(err)
		}
		w := slices.Clone(want)
		if o.sort {
			slices.SortFunc(w, func(a, b switchboard.Instance) int {
				if c := strings.Compare(a.Name, b.Name); c != 0 {
					return c
				}
				return strings.Compare(a.ID, b.ID)
			})
		}
		if !reflect.DeepEqual(got, w) {
			for i := range got {
				if !reflect.DeepEqual(got[i], w[i]) {
					t.Errorf("%+v: row %d:\n got %#v\nwant %#v", o, i, got[i], w[i])
				}
			}
			t.Fatalf("%+v: decoded rows differ from scanned ones", o)
		}
	}

	// Through the catalog: List (the server's order) and Snapshot (sorted
	// here) agree with Get.
	list, err := c.List(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := source{c}.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(want) || len(snap.Instances) != len(want) {
		t.Fatalf("list %d, snapshot %d rows, want %d", len(list), len(snap.Instances), len(want))
	}
	for i, in := range snap.Instances {
		g, err := c.Get(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, g) {
			t.Errorf("snapshot row %d:\n got %#v\nwant %#v", i, in, g)
		}
	}
}

// TestDecodeRejectsMalformed checks that decodeRow reports, rather than
// misreads, values it does not expect.
func TestDecodeRejectsMalformed(t *testing.T) {
	good := func() [][]byte {
		return [][]byte{
			[]byte("id"), []byte("n"), []byte("t"), []byte("a"),
			{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}, // empty text[]
			[]byte("v"), []byte("\x01{}"), nil,
			make([]byte, 16), make([]byte, 8), make([]byte, 8), {0}, make([]byte, 8),
			{0, 0, 0, 100}, []byte("zone"), {1}, []byte("\x01{\"target\": \"tcp://h:1\"}"), []byte("passing"), []byte("ok"), make([]byte, 8),
		}
	}
	var in switchboard.Instance
	if err := decodeRow(good(), &in, nil, nil); err != nil {
		t.Fatalf("well-formed row: %v", err)
	}
	if in.Weight != 100 || in.Zone != "zone" || !in.Draining || in.Check == nil || in.Check.Target != "tcp://h:1" ||
		in.Health.Status != switchboard.StatusPassing || in.Health.Output != "ok" || in.Health.Since.IsZero() {
		t.Fatalf("well-formed row: traffic state %+v", in)
	}
	// Without a check and a time: both NULL.
	v := good()
	v[16], v[19] = nil, nil
	if err := decodeRow(v, &in, nil, nil); err != nil || in.Check != nil || !in.Health.Since.IsZero() {
		t.Fatalf("no check, no since: %+v %v", in, err)
	}
	for name, mutate := range map[string]func(v [][]byte){
		"null id":         func(v [][]byte) { v[0] = nil },
		"short ttl":       func(v [][]byte) { v[8] = v[8][:12] },
		"short timestamp": func(v [][]byte) { v[9] = v[9][:4] },
		"short revision":  func(v [][]byte) { v[12] = v[12][:4] },
		"infinite":        func(v [][]byte) { v[10] = bytes.Repeat([]byte{0xff}, 8); v[10][0] = 0x7f },
		"jsonb version":   func(v [][]byte) { v[6] = []byte("\x02{}") },
		"2-d array": func(v [][]byte) {
			v[4] = []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}
		},
		"array overrun": func(v [][]byte) {
			v[4] = []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 'x'}
		},
		"array null": func(v [][]byte) {
			v[4] = []byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}
		},
		"too few columns":      func(v [][]byte) {},
		"stale not boolean":    func(v [][]byte) { v[11] = nil },
		"short weight":         func(v [][]byte) { v[13] = v[13][:2] },
		"null zone":            func(v [][]byte) { v[14] = nil },
		"draining not boolean": func(v [][]byte) { v[15] = []byte{0, 0} },
		"check jsonb version":  func(v [][]byte) { v[16] = []byte("\x02{}") },
		"empty check":          func(v [][]byte) { v[16] = []byte{} },
		"null health status":   func(v [][]byte) { v[17] = nil },
		"null health output":   func(v [][]byte) { v[18] = nil },
		"short health since":   func(v [][]byte) { v[19] = v[19][:7] },
		"infinite since":       func(v [][]byte) { v[19] = bytes.Repeat([]byte{0xff}, 8); v[19][0] = 0x7f },
	} {
		v := good()
		mutate(v)
		if name == "too few columns" {
			v = v[:13] // a row of a version without the traffic state
		}
		if err := decodeRow(v, &in, nil, nil); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// FuzzDecodeRow: no bytes from the wire panic decodeRow, with or without
// sharing between rows, and both decode the same. The fuzzer's input is split into the 20 columns
// by a length prefix per column (0xff: NULL).
func FuzzDecodeRow(f *testing.F) {
	row := func(cols ...[]byte) []byte {
		var b []byte
		for _, c := range cols {
			if c == nil {
				b = append(b, 0xff)
				continue
			}
			b = append(b, byte(len(c)))
			b = append(b, c...)
		}
		return b
	}
	f.Add(row([]byte("id"), []byte("n"), []byte("t"), []byte("a"),
		[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}, []byte("v"), []byte("\x01{}"), nil,
		make([]byte, 16), make([]byte, 8), make([]byte, 8), []byte{0}, make([]byte, 8),
		[]byte{0, 0, 0, 100}, []byte{}, []byte{0}, nil, []byte{}, []byte{}, nil))
	f.Add(row([]byte("id"), []byte("n"), []byte("t"), []byte("a"),
		[]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 'x'}, []byte("v"),
		[]byte("\x01{\"k\": \"v\"}"), []byte("\x01[]"), make([]byte, 16), make([]byte, 8), make([]byte, 8), []byte{1}, make([]byte, 8),
		[]byte{0, 0, 0x27, 0x10}, []byte("eu-west-1a"), []byte{1}, []byte("\x01{\"target\": \"http://h:1/\", \"interval\": \"10s\"}"),
		[]byte("critical"), []byte("not checked yet"), make([]byte, 8)))
	f.Add(row([]byte("id"), []byte("n"), []byte("t"), []byte("a"),
		[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}, []byte("v"), []byte("\x01{}"), nil,
		make([]byte, 16), make([]byte, 8), make([]byte, 8), []byte{0}, make([]byte, 8),
		[]byte{0xff, 0xff, 0xff, 0xff}, []byte{}, []byte{0}, []byte("\x01{\"interval\": 5}"), []byte("bogus"), []byte("\xff"), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var vals [][]byte
		for len(data) > 0 && len(vals) < colCount {
			n := int(data[0])
			data = data[1:]
			if n == 0xff {
				vals = append(vals, nil)
				continue
			}
			n = min(n, len(data))
			vals = append(vals, data[:n:n])
			data = data[n:]
		}
		var a, b switchboard.Instance
		errA := decodeRow(vals, &a, nil, nil)
		errB := decodeRow(vals, &b, newInterner(), nil)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("decodeRow(%q): %v without sharing, %v with", vals, errA, errB)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("decodeRow(%q): %+v without sharing, %+v with", vals, a, b)
		}
	})
}
