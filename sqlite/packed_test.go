package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// tricky are instances whose stored text needs escaping or is not plain
// ASCII, registered in an order that is not the catalog's.
func tricky() []switchboard.Instance {
	out := []switchboard.Instance{
		{ID: "z-1", Name: "zeta", Version: "v\x1f\"quoted\"\\back\tslash", Metadata: map[string]string{
			"ключ": "значение", "html": "<a href=\"x\">&amp;</a>", "line": "a\u2028b\nc", "emoji": "🙂"}},
		{ID: "a-2", Name: "alpha", Version: "é", Components: json.RawMessage(` { "ports" : [ 1, 2 ],
			"x": "[]{},\"" } `)},
		{ID: "a-1", Name: "alpha", Capabilities: []string{}, Metadata: map[string]string{}},
		{ID: "m.1:x", Name: "mid", Capabilities: []string{"c", "b", "a"}, Metadata: map[string]string{"k": ""}},
		{ID: "b-1", Name: "beta", Version: "[1,2]", Metadata: map[string]string{"[": "]", "{": "}", ",": ":"}},
	}
	for i := range out {
		out[i].Type = switchboard.TypeWriter
		out[i].Address = fmt.Sprintf("10.0.0.%d:4317", i+1)
		if out[i].Capabilities == nil {
			out[i].Capabilities = []string{"storage", "t-" + out[i].Name}
		}
	}
	return out
}

// checkReads asserts that every way of reading c's rows agrees with Get,
// which decodes the columns themselves and not the packed form: List by
// nothing, capability, name and type, and the hub's snapshot.
func checkReads(t *testing.T, c *Catalog) []switchboard.Instance {
	t.Helper()
	ctx := tctx(t)
	all, err := c.List(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(all, func(a, b switchboard.Instance) int { return cmpNameID(&a, &b) }) {
		t.Fatalf("List is not ordered by name then id: %v", ids(all))
	}
	for _, in := range all {
		got, err := c.Get(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("List and Get differ:\n list %#v\n get  %#v", in, got)
		}
	}
	snap, err := source{c}.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range snap.Instances {
		snap.Instances[i].Stale = all[i].Stale // the snapshot's times are the hub's to judge
	}
	if !reflect.DeepEqual(snap.Instances, all) {
		t.Fatalf("snapshot and List differ:\n snapshot %v\n list     %v", ids(snap.Instances), ids(all))
	}
	filter := func(keep func(in switchboard.Instance) bool) []switchboard.Instance {
		out := []switchboard.Instance{}
		for _, in := range all {
			if keep(in) {
				out = append(out, in)
			}
		}
		return out
	}
	for _, in := range all {
		for _, q := range []switchboard.Query{
			{Capability: "storage", All: true}, {Name: in.Name, All: true}, {Type: in.Type, All: true},
			{Capability: "t-" + in.Name, Name: in.Name, All: true},
		} {
			got, err := c.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want := filter(func(x switchboard.Instance) bool {
				return (q.Capability == "" || x.HasCapability(q.Capability)) && (q.Name == "" || x.Name == q.Name) &&
					(q.Type == "" || x.Type == q.Type)
			})
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("List(%+v) = %v, want %v", q, ids(got), ids(want))
			}
		}
	}
	return all
}

func ids(ins []switchboard.Instance) string {
	s := make([]string, len(ins))
	for i, in := range ins {
		s[i] = in.Name + "/" + in.ID
	}
	return strings.Join(s, " ")
}

// The packed form decodes to exactly what the columns hold, escapes,
// non-ASCII text and raw components included, in every read.
func TestPackedReadsMatchColumns(t *testing.T) {
	c, _ := newFile(t)
	for _, in := range tricky() {
		mustRegister(t, c, in)
	}
	all := checkReads(t, c)
	if len(all) != len(tricky()) {
		t.Fatalf("%d instances, want %d", len(all), len(tricky()))
	}
	for _, in := range all {
		if in.ID == "a-2" && !strings.Contains(string(in.Components), "\n") {
			t.Fatalf("components not returned as given: %q", in.Components)
		}
	}
	// A change of content re-packs the row; a heartbeat leaves it.
	in := tricky()[0]
	in.Version, in.Metadata = "2", map[string]string{"only": "this"}
	mustRegister(t, c, in)
	if _, err := c.Heartbeat(tctx(t), in.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.List(tctx(t), switchboard.Query{Name: in.Name})
	if err != nil || len(got) != 1 || got[0].Version != "2" || !reflect.DeepEqual(got[0].Metadata, in.Metadata) {
		t.Fatalf("after an update: %+v %v", got, err)
	}
	checkReads(t, c)
}

// A write that does not set packed (a program built before migration 5,
// the sqlite3 shell) has the row packed by the triggers.
func TestPackedKeptByTriggers(t *testing.T) {
	c, path := newFile(t)
	mustRegister(t, c, tricky()[0])
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)")
	for _, stmt := range []string{
		`INSERT INTO instances (id, name, type, address, capabilities, version, metadata, ttl_ms, registered_at, last_seen)
			VALUES ('old-1', 'old', 'writer', '10.1.1.1:1', '["storage"]', '1', '{"a":"b"}', 3600000, 1, ` + nowSQL + `)`,
		`INSERT INTO instance_capabilities VALUES ('old-1', 'storage')`,
		`UPDATE instances SET name = 'renamed', metadata = '{"c":"d\"e"}' WHERE id = 'z-1'`,
		`UPDATE instances SET packed = '[]' WHERE id = 'old-1'`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var unpacked int
	if err := raw.QueryRow(`SELECT count(*) FROM instances WHERE packed IS NOT ` + packSQL("instances")).Scan(&unpacked); err != nil || unpacked != 0 {
		t.Fatalf("%d rows whose packed form is out of date (%v)", unpacked, err)
	}
	all := checkReads(t, c)
	if got := ids(all); got != "old/old-1 renamed/z-1" {
		t.Fatalf("rows %s", got)
	}
}

// schemaV4 creates at path the schema as migrations 1–4 left it.
func schemaV4(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	raw.SetMaxOpenConns(1)
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:4] {
		if _, err := raw.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, v+1); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// A file of schema version 4 is upgraded in place when opened: every row,
// its capabilities and the change log are kept, and every read gives what
// the columns hold.
func TestMigration5Upgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	raw := schemaV4(t, path)
	now := time.Now().UnixMicro()
	want := map[string]switchboard.Instance{}
	for i, in := range tricky() {
		n, err := switchboard.Normalize(in)
		if err != nil {
			t.Fatal(err)
		}
		caps, _ := json.Marshal(n.Capabilities)
		md := n.Metadata
		if md == nil {
			md = map[string]string{}
		}
		mdj, _ := json.Marshal(md)
		var comp any
		if len(n.Components) > 0 {
			comp = string(n.Components)
		}
		reg := now - int64(i)*1000
		if _, err := raw.Exec(`INSERT INTO instances (id, name, type, address, capabilities, version, metadata, components, ttl_ms, registered_at, last_seen)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, n.ID, n.Name, n.Type, n.Address, string(caps), n.Version, string(mdj), comp,
			3600000, reg, now); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO instance_capabilities SELECT ?, value FROM json_each(?)`, n.ID, string(caps)); err != nil {
			t.Fatal(err)
		}
		res, err := raw.Exec(`INSERT INTO changes (id, op, at) VALUES (?, 'upsert', ?)`, n.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		// Migration 7 takes each row's revision from its last entry.
		if n.Revision, err = res.LastInsertId(); err != nil {
			t.Fatal(err)
		}
		n.TTL = time.Hour
		n.RegisteredAt, n.LastSeen = time.UnixMicro(reg).UTC(), time.UnixMicro(now).UTC()
		n.Capabilities = slices.Clip(append([]string{}, n.Capabilities...))
		n.Metadata = md
		want[n.ID] = n
	}
	var capRows int
	if err := raw.QueryRow(`SELECT count(*) FROM instance_capabilities`).Scan(&capRows); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	c := openFile(t, path)
	var version, unpacked, capsAfter, logged int
	if err := c.d.rdb.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", version, err, len(migrations))
	}
	if err := c.d.rdb.QueryRow(`SELECT count(*) FROM instances WHERE packed IS NOT ` + packSQL("instances")).Scan(&unpacked); err != nil || unpacked != 0 {
		t.Fatalf("%d rows not packed (%v)", unpacked, err)
	}
	if err := c.d.rdb.QueryRow(`SELECT count(*) FROM instance_capabilities`).Scan(&capsAfter); err != nil || capsAfter != capRows {
		t.Fatalf("%d capability rows after the upgrade, %d before (%v)", capsAfter, capRows, err)
	}
	if err := c.d.rdb.QueryRow(`SELECT count(*) FROM changes`).Scan(&logged); err != nil || logged != len(want) {
		t.Fatalf("%d change-log entries after the upgrade, want %d (%v)", logged, len(want), err)
	}
	all := checkReads(t, c)
	if len(all) != len(want) {
		t.Fatalf("%d instances after the upgrade, want %d", len(all), len(want))
	}
	for _, in := range all {
		if !reflect.DeepEqual(in, want[in.ID]) {
			t.Fatalf("after the upgrade:\n got  %#v\n want %#v", in, want[in.ID])
		}
	}
	// The upgraded table works as a new one: a re-registration, a
	// deregistration (its capability rows go with it), the revival trigger.
	in := tricky()[1]
	in.Version = "3"
	mustRegister(t, c, in)
	if err := c.Deregister(tctx(t), "z-1"); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := c.d.rdb.QueryRow(`SELECT count(*) FROM instance_capabilities WHERE instance_id = 'z-1'`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d capability rows of a deregistered instance (%v)", orphans, err)
	}
	checkReads(t, c)
}

// A malformed packed form is an error, never a panic or a wrong instance.
func TestUnpackMalformed(t *testing.T) {
	good := `["id","name","writer","1.2.3.4:5",["a","b"],"v\"1",{"k":"v"},1000,12]`
	var in switchboard.Instance
	var ttl, reg int64
	if err := unpack(good, &in, nil, nil, &ttl, &reg); err != nil || in.Version != `v"1` || ttl != 1000 || reg != 12 {
		t.Fatalf("unpack(%s) = %+v %d %d %v", good, in, ttl, reg, err)
	}
	for i := range len(good) {
		if err := unpack(good[:i], &in, nil, nil, &ttl, &reg); err == nil {
			t.Fatalf("unpack(%q) did not fail", good[:i])
		}
	}
	for _, bad := range []string{``, `{}`, `[]`, `["a","b","c","d",{},"v",[],1,2]`, `["a","b","c","d",[],"v",{},x,2]`,
		good + `,`, `["a","b","c","d",[],"v",{},1,2,3]`, `["a","b","c","d",["x"]],"v",{},1,2]`} {
		if err := unpack(bad, &in, nil, nil, &ttl, &reg); err == nil {
			t.Fatalf("unpack(%q) did not fail", bad)
		}
	}
}

// sortedOrder orders by name then id like a plain sort, groups of equal
// names in any order included.
func TestSortedOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 10, 1000} {
		for _, names := range []int{1, 3, n + 1} {
			keys := make([]nameID, n)
			for i := range keys {
				keys[i] = nameID{name: fmt.Sprint("n", r.IntN(names)), id: fmt.Sprint(r.IntN(10 * (n + 1)))}
			}
			var got []nameID
			for _, i := range sortedOrder(keys) {
				got = append(got, keys[i])
			}
			want := slices.Clone(keys)
			slices.SortStableFunc(want, func(a, b nameID) int {
				if c := strings.Compare(a.name, b.name); c != 0 {
					return c
				}
				return strings.Compare(a.id, b.id)
			})
			if len(got) != len(want) || (n > 0 && !slices.Equal(got, want)) {
				t.Fatalf("n=%d names=%d: got %v, want %v", n, names, got, want)
			}
		}
	}
}

func cmpNameID(a, b *switchboard.Instance) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// FuzzUnpack: no input panics unpack or packedID, whatever unpack accepts
// it decodes the same with and without sharing, and packedID finds the id
// unpack reads (packed rows may come from any writer of the file through
// the triggers).
func FuzzUnpack(f *testing.F) {
	f.Add(`["id","name","writer","1.2.3.4:5",["a","b"],"v\"1",{"k":"v"},1000,12]`)
	f.Add(`["a","b","c","d",[],"",{},1,2]`)
	f.Add(`["\u00e9","b","c","d",["x","x"],"v",{"a":"\\n","b":""},-1,0]`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, s string) {
		var a, b switchboard.Instance
		var ttlA, regA, ttlB, regB int64
		errA := unpack(s, &a, nil, nil, &ttlA, &regA)
		errB := unpack(s, &b, newSharer(), nil, &ttlB, &regB)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("unpack(%q): %v without sharing, %v with", s, errA, errB)
		}
		if errA == nil && (!reflect.DeepEqual(a, b) || ttlA != ttlB || regA != regB) {
			t.Fatalf("unpack(%q): %+v %d %d without sharing, %+v %d %d with", s, a, ttlA, regA, b, ttlB, regB)
		}
		// A resync looks a row up by the id at its head before deciding
		// to decode it: the same id unpack reads.
		if id, ok := packedID(s); errA == nil && (!ok || id != a.ID) {
			t.Fatalf("packedID(%q) = %q, %v; unpack read %q", s, id, ok, a.ID)
		}
	})
}
