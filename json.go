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
	Weight       int               `json:"weight,omitempty"`
	Zone         string            `json:"zone,omitempty"`
	Draining     bool              `json:"draining,omitempty"`
	// Status is Instance.Status, written for readers; it is ignored on
	// input (Draining and Health say it).
	Status Status      `json:"status,omitempty"`
	Check  *checkJSON  `json:"check,omitempty"`
	Health *healthJSON `json:"health,omitempty"`
}

type checkJSON struct {
	Target          string `json:"target"`
	Interval        string `json:"interval,omitempty"`
	Timeout         string `json:"timeout,omitempty"`
	Failures        int    `json:"failures,omitempty"`
	Successes       int    `json:"successes,omitempty"`
	Body            string `json:"body,omitempty"`
	DeregisterAfter string `json:"deregister_after,omitempty"`
}

type healthJSON struct {
	Status Status `json:"status"`
	Output string `json:"output,omitempty"`
	Since  string `json:"since,omitempty"`
}

func durationString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func (c *Check) toJSON() *checkJSON {
	return &checkJSON{
		Target: c.Target, Interval: durationString(c.Interval), Timeout: durationString(c.Timeout),
		Failures: c.Failures, Successes: c.Successes, Body: c.Body, DeregisterAfter: durationString(c.DeregisterAfter),
	}
}

// MarshalJSON writes a check as the HTTP API and the CLI's JSON show it:
// durations like "10s".
func (c Check) MarshalJSON() ([]byte, error) { return json.Marshal(c.toJSON()) }

// UnmarshalJSON reads the form MarshalJSON writes.
func (c *Check) UnmarshalJSON(b []byte) error {
	var j checkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out, err := j.check()
	if err != nil {
		return err
	}
	*c = out
	return nil
}

func (j *checkJSON) check() (Check, error) {
	out := Check{Target: j.Target, Failures: j.Failures, Successes: j.Successes, Body: j.Body}
	for _, f := range []struct {
		name string
		s    string
		d    *time.Duration
	}{{"interval", j.Interval, &out.Interval}, {"timeout", j.Timeout, &out.Timeout}, {"deregister_after", j.DeregisterAfter, &out.DeregisterAfter}} {
		if f.s == "" {
			continue
		}
		d, err := time.ParseDuration(f.s)
		if err != nil {
			return Check{}, fmt.Errorf("check.%s: %w", f.name, err)
		}
		*f.d = d
	}
	return out, nil
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
		Weight: in.Weight, Zone: in.Zone, Draining: in.Draining, Status: in.Status(),
	}
	if in.Check != nil {
		j.Check = in.Check.toJSON()
	}
	if in.Health.Status != "" {
		j.Health = &healthJSON{Status: in.Health.Status, Output: in.Health.Output, Since: formatTime(in.Health.Since)}
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
		Weight: j.Weight, Zone: j.Zone, Draining: j.Draining,
	}
	var err error
	if j.Check != nil {
		c, err := j.Check.check()
		if err != nil {
			return err
		}
		out.Check = &c
	}
	if j.Health != nil {
		out.Health = Health{Status: j.Health.Status, Output: j.Health.Output}
		if out.Health.Since, err = parseTime(j.Health.Since); err != nil {
			return fmt.Errorf("health.since: %w", err)
		}
	}
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
