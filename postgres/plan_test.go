package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestRenewUnchangedPlansByID checks that the generic plan of Register's
// first statement (the one a connection caches after a few executions)
// finds the row by its primary key, on a table whose statistics are still
// those of an empty one and whose rows all share one name, type and
// capability list: the shape in which a plan free to choose walked the
// name index, every replica of the service, on each registration.
func TestRenewUnchangedPlansByID(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t, testDSN)
	c := openDSN(t, dsn, switchboard.Options{})
	for i := range 300 {
		in := inst("replicated", fmt.Sprintf("10.0.%d.%d:4317", i/256, i%256), "storage")
		in.ID = fmt.Sprintf("replica-%03d", i)
		if _, err := c.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE renew (text, text, text, text, text[], text, jsonb, text, interval, integer, text, jsonb, integer) AS ` + renewUnchangedSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN EXECUTE renew ('replica-007', 'replicated', 'writer', '10.0.0.7:4317',
		'{storage}', '1.0.0', '{}', NULL, '10 seconds', 100, '', NULL, 9)`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "instances_pkey") || strings.Contains(plan, "instances_name_idx") ||
		strings.Contains(plan, "instances_capabilities_idx") {
		t.Fatalf("the generic plan does not find the row by id alone:\n%s", plan)
	}
}
