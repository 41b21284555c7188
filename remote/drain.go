package remote

import (
	"context"
	"fmt"
	"net/http"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// Drain implements switchboard.Drainer: POST (or, to undo, DELETE)
// /v1/instances/{id}/drain with the instance's secret when this client
// registered it (the server also takes the admin token).
func (c *Client) Drain(ctx context.Context, id string, draining bool) (switchboard.Instance, error) {
	if err := switchboard.ValidateID(id); err != nil {
		// No row can have it (as Deregister has it).
		return switchboard.Instance{}, fmt.Errorf("drain %q: %w (%v)", id, switchboard.ErrNotFound, err)
	}
	method := http.MethodPost
	if !draining {
		method = http.MethodDelete
	}
	var in switchboard.Instance
	if err := c.do(ctx, method, "/v1/instances/"+pathID(id)+"/drain", nil, &in, schema.SecretHeader, c.secret(id)); err != nil {
		return switchboard.Instance{}, fmt.Errorf("drain %q: %w", id, err)
	}
	return in, nil
}
