package switchboard

import (
	"encoding/json"
	"fmt"
	"time"
)

// TimeFormat is RFC 3339 with milliseconds, in UTC: the JSON form of
// registered_at and last_seen.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

type instanceJSON struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Type         string            `json:"type"`
	Address      string            `json:"address"`
	Capabilities []string          `json:"capabilities"`
	Version      string            `json:"version"`
	Metadata     map[string]string `json:"metadata"`
	Components   json.RawMessage   `json:"components,omitempty"`
	TTL          string            `json:"ttl"`
	RegisteredAt string            `json:"registered_at"`
	LastSeen     string            `json:"last_seen"`
	Stale        bool              `json:"stale"`
	Revision     int64             `json:"revision,omitempty"`
}

// MarshalJSON writes the instance in the CLI and HTTP contract: capabilities
// always an array, metadata always an object, ttl like "10s", times RFC 3339
// with milliseconds.
func (in Instance) MarshalJSON() ([]byte, error) {
	j := instanceJSON{
		ID: in.ID, Name: in.Name, Type: in.Type, Address: in.Address,
		Capabilities: in.Capabilities, Version: in.Version, Metadata: in.Metadata,
		Components: in.Components, TTL: in.TTL.String(), Stale: in.Stale, Revision: in.Revision,
		RegisteredAt: formatTime(in.RegisteredAt), LastSeen: formatTime(in.LastSeen),
	}
	if j.Capabilities == nil {
		j.Capabilities = []string{}
	}
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (in *Instance) UnmarshalJSON(b []byte) error {
	var j instanceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Instance{
		ID: j.ID, Name: j.Name, Type: j.Type, Address: j.Address,
		Capabilities: j.Capabilities, Version: j.Version, Metadata: j.Metadata,
		Components: j.Components, Stale: j.Stale, Revision: j.Revision,
	}
	var err error
	if j.TTL != "" {
		if out.TTL, err = time.ParseDuration(j.TTL); err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
	}
	if out.RegisteredAt, err = parseTime(j.RegisteredAt); err != nil {
		return fmt.Errorf("registered_at: %w", err)
	}
	if out.LastSeen, err = parseTime(j.LastSeen); err != nil {
		return fmt.Errorf("last_seen: %w", err)
	}
	*in = out
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// MarshalJSON writes {"event":…,"reason":…,"instance":{…}} (and "error"
// for EventError).
func (e Event) MarshalJSON() ([]byte, error) {
	type out struct {
		Event    EventKind `json:"event"`
		Reason   Reason    `json:"reason,omitempty"`
		Instance *Instance `json:"instance,omitempty"`
		Error    string    `json:"error,omitempty"`
		Revision int64     `json:"revision,omitempty"`
	}
	o := out{Event: e.Kind, Reason: e.Reason, Revision: e.Revision}
	switch e.Kind {
	case EventAdded, EventUpdated, EventRemoved:
		in := e.Instance
		o.Instance = &in
	}
	if e.Err != nil {
		o.Error = e.Err.Error()
	}
	return json.Marshal(o)
}
