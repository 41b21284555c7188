package remote

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// TestHeartbeatFitsOneWrite: the body of a heartbeat of 500 registrations
// (a uuid and a 43-character secret each, as the server issues them), with
// its headers, fits the client's write buffer, so it leaves in one write
// system call instead of one per 4 KiB.
func TestHeartbeatFitsOneWrite(t *testing.T) {
	c, err := Open(context.Background(), "http://127.0.0.1:1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req schema.HeartbeatRequest
	for range 500 {
		req.Instances = append(req.Instances, schema.HeartbeatItem{ID: uuid.NewString(), Secret: strings.Repeat("s", 43)})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	const headers = 512 // request line, Host, Content-Type, Content-Length, User-Agent, Authorization
	if got := c.srv.current().http.Transport.(*http.Transport).WriteBufferSize; got < len(body)+headers {
		t.Fatalf("write buffer %d bytes; a heartbeat of 500 is %d bytes and its headers", got, len(body))
	}
}
