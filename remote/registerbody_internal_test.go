package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// A registration's body leaves out what servers only write (a server of a
// release from before those fields refuses any field it does not know) and
// the default weight, and keeps a weight, zone or check the caller set.
func TestRegisterBodyLeavesOutputOnlyFields(t *testing.T) {
	in := switchboard.Instance{ID: "a", Name: "a", Type: "writer", Address: "127.0.0.1:1",
		Weight: switchboard.DefaultWeight, Draining: true, Revision: 7}
	m, err := registerBody(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(outputOnly, "weight", "zone", "check") {
		if _, ok := m[k]; ok {
			t.Errorf("body has %q: %s", k, m[k])
		}
	}
	for _, k := range []string{"id", "name", "type", "address", "ttl"} {
		if _, ok := m[k]; !ok {
			t.Errorf("body lacks %q", k)
		}
	}
	in.Weight, in.Zone = 5, "eu-1"
	in.Check = &switchboard.Check{Target: "http://127.0.0.1:1/health"}
	if m, err = registerBody(in); err != nil {
		t.Fatal(err)
	}
	if string(m["weight"]) != "5" || string(m["zone"]) != `"eu-1"` || m["check"] == nil {
		t.Errorf("body lost what the caller set: weight %s zone %s check %s", m["weight"], m["zone"], m["check"])
	}
}

// A server older than a field the caller set refuses it as unknown (as
// releases from before weights did); the client's error names the field,
// the server's release as /v1/info reports it (or that it reports none),
// and what to do, and stays an ErrInvalid FieldError.
func TestRegisterOnOlderServerNamesItsRelease(t *testing.T) {
	for _, version := range []string{"", "switchboard v0.9.0 (revision abc)"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/instances":
				var body map[string]json.RawMessage
				json.NewDecoder(r.Body).Decode(&body)
				field := "weight"
				if _, ok := body["zone"]; ok {
					field = "zone"
				}
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(schema.ErrorBody{Error: fmt.Sprintf("unknown field %q", field), Field: field, Code: schema.CodeInvalid})
			case "/v1/info":
				json.NewEncoder(w).Encode(schema.Info{Healthy: true, Version: version})
			default:
				http.NotFound(w, r)
			}
		}))
		c := openList(t, srv.URL)
		_, err := c.Register(context.Background(), switchboard.Instance{Name: "a", Type: "writer", Address: "127.0.0.1:1", Weight: 5, TTL: 10 * time.Second})
		_, zerr := c.Register(context.Background(), switchboard.Instance{Name: "a", Type: "writer", Address: "127.0.0.1:1", Zone: "eu-1", TTL: 10 * time.Second})
		srv.Close()
		var zfe *switchboard.FieldError
		if !errors.As(zerr, &zfe) || zfe.Field != "zone" || zfe.Value != "eu-1" {
			t.Fatalf("server %q: want an invalid zone FieldError with the zone as set, got %v", version, zerr)
		}
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "weight" || fe.Value != "5" || !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("server %q: want an invalid weight FieldError, got %v", version, err)
		}
		want := version
		if want == "" {
			want = "does not report its version"
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "upgrade the server, or leave weight unset") {
			t.Errorf("server %q: error does not name the release and the way out: %v", version, err)
		}
	}
}
