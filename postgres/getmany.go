package postgres

import (
	"context"
	"fmt"

	"github.com/switchboard-io/switchboard"
)

// GetMany implements switchboard.MultiGetter: the rows of ids, stale or
// not, in one statement (WHERE id = ANY($1), through the primary key).
func (c *Catalog) GetMany(ctx context.Context, ids []string) ([]switchboard.Instance, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(ids) > switchboard.MaxHeartbeatIDs {
		return nil, fmt.Errorf("postgres: get many: %w: %d ids; at most %d", switchboard.ErrInvalid, len(ids), switchboard.MaxHeartbeatIDs)
	}
	keep := make([]string, 0, len(ids))
	for _, id := range ids {
		if storable(id) { // no row can have another
			keep = append(keep, id)
		}
	}
	if len(keep) == 0 {
		return nil, nil
	}
	rows, err := c.pool.Query(ctx, `SELECT `+cols+` FROM instances WHERE id = ANY($1)`, binaryResults, keep)
	if err != nil {
		return nil, c.wrap("get many", err)
	}
	out, err := readAll(rows, readOpts{sizeHint: len(keep), md: &c.md})
	if err != nil {
		return nil, c.wrap("get many", err)
	}
	return out, nil
}
