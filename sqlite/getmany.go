package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-io/switchboard"
)

// getManyChunk bounds the ids of one statement, far below SQLite's limit
// of bound variables.
const getManyChunk = 500

// GetMany implements switchboard.MultiGetter: the rows of ids, stale or
// not, read in one transaction with WHERE id IN (…) (one statement per
// 500 ids).
func (c *Catalog) GetMany(ctx context.Context, ids []string) ([]switchboard.Instance, error) {
	if c.closed.Load() {
		return nil, errClosed("get many")
	}
	if len(ids) > switchboard.MaxHeartbeatIDs {
		return nil, fmt.Errorf("sqlite: get many: %w: %d ids; at most %d", switchboard.ErrInvalid, len(ids), switchboard.MaxHeartbeatIDs)
	}
	var out []switchboard.Instance
	err := c.read(ctx, func(tx *txn) error {
		out = nil
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		for rest := ids; len(rest) > 0; {
			part := rest[:min(len(rest), getManyChunk)]
			rest = rest[len(part):]
			args := make([]any, len(part))
			for i, id := range part {
				args[i] = id
			}
			query := `SELECT ` + packedCols + ` FROM instances i WHERE i.id IN (?` + strings.Repeat(`,?`, len(part)-1) + `)`
			got, err := queryInstances(ctx, tx, nil, &c.md, now, len(part), query, args...)
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", err)
	}
	return out, nil
}
