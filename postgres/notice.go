package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// notice is the NOTIFY payload of one logged change, as logEntrySQL builds
// it: enough for a hub that has seen everything before Seq to apply the
// change without reading the log. An empty payload carries nothing: read
// the log.
type notice struct {
	Epoch  string          `json:"e"`
	Seq    int64           `json:"s"`
	At     time.Time       `json:"t"`
	Wrote  time.Time       `json:"w"` // the entry's at column: with Seq and ID, its mark (hub.Mark)
	Op     string          `json:"o"`
	Reason string          `json:"r"`
	ID     string          `json:"id"`
	Row    *noticeInstance `json:"i"` // the row as the change left it (upserts)
}

// noticeInstance is the row in a notice. It looks like the root's
// instance JSON (switchboard.Instance's MarshalJSON) but is not that
// contract and cannot reuse it: SQL builds it (json_build_object in
// logEntrySQL), the TTL is whole microseconds rather than a duration
// string, and the times keep PostgreSQL's full microsecond precision
// where the CLI contract shows milliseconds, so a notice decodes to exactly
// what a log read returns.
type noticeInstance struct {
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Address      string            `json:"address"`
	Capabilities []string          `json:"capabilities"`
	Version      string            `json:"version"`
	Metadata     map[string]string `json:"metadata"`
	Components   json.RawMessage   `json:"components"`
	TTLMicros    int64             `json:"ttl_us"`
	RegisteredAt time.Time         `json:"registered_at"`
	LastSeen     time.Time         `json:"last_seen"`
	Stale        bool              `json:"stale"`
	// The traffic state. Weight is nil in the notice of a program older
	// than the state (it writes none of it): such a notice is not read,
	// the log is.
	Weight       *int            `json:"weight"`
	Zone         string          `json:"zone"`
	Draining     bool            `json:"draining"`
	Check        json.RawMessage `json:"check"`
	HealthStatus string          `json:"health_status"`
	HealthOutput string          `json:"health_output"`
	HealthSince  *time.Time      `json:"health_since"`
}

// decodeNotice turns a payload into the batch it announces. The instance
// is built as a log read would return it (row.instance): the hub must not
// tell the two paths apart.
func decodeNotice(payload string) (hub.Batch, error) {
	var n notice
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return hub.Batch{}, fmt.Errorf("notification payload: %w", err)
	}
	if n.Epoch == "" || n.Seq <= 0 || n.ID == "" {
		return hub.Batch{}, errors.New("notification payload: no epoch, seq or id")
	}
	ch := hub.Change{Seq: n.Seq, ID: n.ID, Instance: switchboard.Instance{ID: n.ID}, At: n.Wrote.UTC()}
	switch n.Op {
	case "delete":
		ch.Deleted, ch.Reason = true, switchboard.Reason(n.Reason)
	case "upsert":
		if n.Row == nil {
			return hub.Batch{}, errors.New("notification payload: an upsert without its row")
		}
		r := n.Row
		if r.Weight == nil {
			return hub.Batch{}, errors.New("notification payload: no traffic state (a program of an older version wrote it)")
		}
		in := switchboard.Instance{ID: n.ID, Name: r.Name, Type: r.Type, Address: r.Address,
			Capabilities: r.Capabilities, Version: r.Version, TTL: readTTL(time.Duration(r.TTLMicros) * time.Microsecond),
			RegisteredAt: r.RegisteredAt.UTC(), LastSeen: r.LastSeen.UTC(), Stale: r.Stale,
			Weight: *r.Weight, Zone: r.Zone, Draining: r.Draining,
			Health: switchboard.Health{Status: healthStatus(r.HealthStatus), Output: r.HealthOutput}}
		if r.HealthSince != nil {
			in.Health.Since = r.HealthSince.UTC()
		}
		if len(r.Check) > 0 && string(r.Check) != "null" {
			in.Check = backend.ReadCheck(n.ID, r.Check, nil)
		}
		if len(r.Metadata) > 0 {
			in.Metadata = r.Metadata
		}
		if len(r.Components) > 0 && string(r.Components) != "null" {
			in.Components = r.Components
		}
		if in.Capabilities == nil {
			in.Capabilities = []string{}
		}
		in.Revision = n.Seq // the entry's trigger made it the row's revision
		ch.Instance, ch.Found = in, true
	default:
		return hub.Batch{}, fmt.Errorf("notification payload: op %q", n.Op)
	}
	return hub.Batch{Changes: []hub.Change{ch}, Seq: n.Seq, Epoch: n.Epoch, Now: n.At.UTC()}, nil
}
