package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// maxStmts bounds the prepared statements kept per pool (the package uses
// a few dozen distinct statements).
const maxStmts = 128

// stmtCache keeps pool-level prepared statements, so a statement is parsed
// once per connection instead of at every execution (parsing was about
// 45 % of a Register's CPU). A statement cannot be prepared on the pool
// while a transaction holds its only connection (the write pool has one),
// so a statement first runs unprepared and is prepared after the
// transaction ends; inside later transactions Tx.StmtContext reuses it on
// the transaction's connection.
type stmtCache struct {
	db   *sql.DB
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

func (sc *stmtCache) get(query string) *sql.Stmt {
	if strings.IndexByte(query, ';') >= 0 {
		return nil // a script (a migration): only its first statement would be prepared
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := sc.m[query]
	if st == nil && len(sc.m)+len(sc.want) < maxStmts {
		sc.want[query] = true
	}
	return st
}

// prepareWanted prepares the statements that ran unprepared. Call it with
// no transaction of this pool open in the calling goroutine.
func (sc *stmtCache) prepareWanted(ctx context.Context) {
	sc.mu.Lock()
	if len(sc.want) == 0 {
		sc.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(sc.want))
	for q := range sc.want {
		queries = append(queries, q)
	}
	sc.want = map[string]bool{}
	sc.mu.Unlock()
	for _, q := range queries {
		st, err := sc.db.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared; nothing is lost
		}
		sc.mu.Lock()
		if sc.m[q] == nil {
			sc.m[q] = st
			st = nil
		}
		sc.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

func (sc *stmtCache) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, st := range sc.m {
		st.Close()
	}
	sc.m = map[string]*sql.Stmt{}
}

// txn is a transaction that runs its statements prepared when it can.
type txn struct {
	*sql.Tx
	sc *stmtCache
}

func (t *txn) stmt(ctx context.Context, query string) *sql.Stmt {
	if st := t.sc.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	return nil
}

// ExecContext is sql.Tx.ExecContext through the statement cache.
func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryContext is sql.Tx.QueryContext through the statement cache.
func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.Tx.QueryRowContext through the statement cache.
func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}
