package sqlite

import (
	"strings"
	"testing"
	"time"
)

// Every statement of a reap (the look, the log, the deletion, for each
// kind of reap) and a hub's read of renewals are ranges
// of the instances_expiry index, one per distinct TTL, never a scan of the
// table: every process's reaper looks every few seconds, and at 10,000 rows
// a scan was a fifth of a heartbeating fleet's CPU.
func TestReapAndRenewalsSearchTheExpiryIndex(t *testing.T) {
	c, _ := newFile(t)
	for i, ttl := range []time.Duration{time.Second, time.Second, time.Minute} {
		in := sample(string(rune('a' + i)))
		in.TTL = ttl
		mustRegister(t, c, in)
	}
	type query struct {
		what, query string
		args        []any
	}
	queries := []query{{"renewals", renewedSQL, []any{0}}}
	for _, r := range []struct {
		what, cond string
		args       []any
	}{
		{"reap with the grace", graceCond, []any{0, 0}},
		{"reap", staleCond, []any{0}},
		{"reap --older-than", olderCond, []any{0}},
	} {
		look, logged, del := reapSQL(r.cond)
		queries = append(queries,
			query{r.what + ": look", look, r.args},
			query{r.what + ": log", logged, append([]any{"expired", 0}, r.args...)},
			query{r.what + ": delete", del, r.args})
	}
	for _, q := range queries {
		var plan []string
		err := c.read(tctx(t), func(tx *txn) error {
			rows, err := tx.QueryContext(tctx(t), `EXPLAIN QUERY PLAN `+q.query, q.args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		all := strings.Join(plan, "; ")
		if !strings.Contains(all, "instances_expiry (ttl_ms=? AND last_seen") {
			t.Errorf("%s: no range of the expiry index per TTL: %s", q.what, all)
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN i") && !strings.HasPrefix(step, "SCAN ttls") {
				t.Errorf("%s scans the table: %s", q.what, all)
			}
		}
	}
}
