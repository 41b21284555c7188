package sqlite

import (
	"context"
	"slices"
	"strings"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/jsonfast"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// queryInstances runs query, which selects packedCols in any order, and
// decodes its rows by name then id, the order of List and of the hub's
// snapshot: sorting here costs less than SQLite's own ways, a lookup of
// the table per row through the name index (a whole table) or a sort of
// the packed rows (a capability's). The rows are sorted before they are
// decoded (their id and name lead the packed form), so each instance is
// written once, in place. sh shares decoded forms (nil: none); ml logs
// metadata in another form (see storedmeta.Log); n is a capacity hint.
func queryInstances(ctx context.Context, tx *txn, sh *sharer, ml *storedmeta.Log, now int64, n int, query string, args ...any) ([]switchboard.Instance, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	raw := make([]packedRow, 0, n)
	var p packedRow
	dest := p.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		raw = append(raw, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	keys := make([]nameID, len(raw))
	for i := range raw {
		if keys[i], err = packedKey(raw[i].packed); err != nil {
			return nil, err
		}
	}
	out := make([]switchboard.Instance, len(raw))
	for k, i := range sortedOrder(keys) {
		if err := raw[i].decode(&out[k], sh, ml, now); err != nil {
			return nil, err
		}
		raw[i] = packedRow{} // the instance holds what it needs of it
	}
	return out, nil
}

// nameID is the sort key of a row.
type nameID struct{ name, id string }

// packedKey reads the id and name that lead a packed row.
func packedKey(s string) (nameID, error) {
	var k nameID
	i, ok := expect(s, 0, '[')
	if !ok {
		return k, errPacked
	}
	var err error
	if k.id, i, err = jsonfast.String(s, i); err != nil {
		return k, err
	}
	if i, ok = expect(s, i, ','); !ok {
		return k, errPacked
	}
	k.name, _, err = jsonfast.String(s, i)
	return k, err
}

// sortedOrder returns the indexes of keys ordered by name then id. The
// distinct names are sorted (a fleet has far fewer names than instances),
// the indexes are placed by name in one counting pass, and each name's
// indexes are sorted by id (usually in order already).
func sortedOrder(keys []nameID) []int32 {
	group := make(map[string]int32)
	of := make([]int32, len(keys)) // the group of each key
	var names []string
	for i := range keys {
		g, ok := group[keys[i].name]
		if !ok {
			g = int32(len(names))
			group[keys[i].name] = g
			names = append(names, keys[i].name)
		}
		of[i] = g
	}
	byName := make([]int32, len(names))
	for g := range byName {
		byName[g] = int32(g)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	count := make([]int32, len(names))
	for _, g := range of {
		count[g]++
	}
	start := make([]int32, len(names)) // where each group begins
	at := int32(0)
	for _, g := range byName {
		start[g] = at
		at += count[g]
	}
	perm := make([]int32, len(keys))
	next := slices.Clone(start)
	for i, g := range of {
		perm[next[g]] = int32(i)
		next[g]++
	}
	byID := func(a, b int32) int { return strings.Compare(keys[a].id, keys[b].id) }
	for g := range names {
		if seg := perm[start[g] : start[g]+count[g]]; !slices.IsSortedFunc(seg, byID) {
			slices.SortFunc(seg, byID)
		}
	}
	return perm
}
