package router

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Retry policy defaults and limits (SPEC §7).
const (
	DefaultMaxAttempts        = 1
	MaxMaxAttempts            = 10
	DefaultInitialDelay       = time.Second
	DefaultBackoffCoefficient = 2.0
	DefaultMaxDelay           = 30 * time.Second
	// MaxBackoffCoefficient bounds the growth factor between attempts.
	MaxBackoffCoefficient = 100.0
)

// RetryPolicy is an edge's retry policy. The zero value means one attempt:
// nothing retries implicitly. Zero fields take the defaults of SPEC §7
// (WithDefaults); Validate rejects out-of-range values.
//
// Retries are at-least-once: an attempt that timed out or lost its
// connection may have run the handler, and the next attempt runs it again.
// Every attempt carries the same Message.ID, so a receiver can deduplicate.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, first one included: 1–10,
	// default 1 (no retry).
	MaxAttempts int
	// InitialDelay is the wait before the second attempt (default 1s).
	InitialDelay time.Duration
	// BackoffCoefficient multiplies the wait after every retry (default
	// 2.0, at least 1).
	BackoffCoefficient float64
	// MaxDelay caps the wait between attempts (default 30s).
	MaxDelay time.Duration
	// NonRetryableErrorCodes are error codes never retried, even when the
	// error says it is retryable.
	NonRetryableErrorCodes []string
	// Timeout bounds each attempt; zero means only the caller's context
	// bounds it.
	Timeout time.Duration
}

// Validate reports the first out-of-range field as an *Error with code
// "invalid_policy".
func (p RetryPolicy) Validate() error {
	bad := func(field string, v any, why string) error {
		return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy %s=%v: %s", field, v, why))
	}
	switch {
	case p.MaxAttempts < 0 || p.MaxAttempts > MaxMaxAttempts:
		return bad("maxAttempts", p.MaxAttempts, "must be from 1 to 10 (0 means the default, 1)")
	case p.InitialDelay < 0:
		return bad("initialDelay", p.InitialDelay, "must not be negative")
	case p.MaxDelay < 0:
		return bad("maxDelay", p.MaxDelay, "must not be negative")
	case math.IsNaN(p.BackoffCoefficient) || p.BackoffCoefficient < 0 || (p.BackoffCoefficient != 0 && p.BackoffCoefficient < 1) || p.BackoffCoefficient > MaxBackoffCoefficient:
		return bad("backoffCoefficient", p.BackoffCoefficient, "must be from 1 to 100 (0 means the default, 2.0)")
	case p.Timeout < 0:
		return bad("timeout", p.Timeout, "must not be negative")
	}
	d := p.WithDefaults()
	if d.MaxDelay < d.InitialDelay {
		return bad("maxDelay", d.MaxDelay, fmt.Sprintf("must not be below initialDelay (%v)", d.InitialDelay))
	}
	for _, c := range p.NonRetryableErrorCodes {
		if c == "" {
			return bad("nonRetryableErrorCodes", p.NonRetryableErrorCodes, "codes must not be empty")
		}
	}
	return nil
}

// CodeInvalidPolicy: a retry policy failed validation. Not retryable.
const CodeInvalidPolicy = "invalid_policy"

// WithDefaults returns p with zero fields set to the defaults.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultInitialDelay
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = DefaultBackoffCoefficient
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	return p
}

// Delay returns the wait after the given failed attempt (1-based):
// InitialDelay × BackoffCoefficient^(attempt-1), capped at MaxDelay. p must
// have its defaults applied.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := float64(p.InitialDelay) * math.Pow(p.BackoffCoefficient, float64(attempt-1))
	// >=, not >: float64(MaxDelay) rounds up, to 2^63 for math.MaxInt64,
	// and converting 2^63 to a Duration overflows to a negative wait.
	if d >= float64(p.MaxDelay) || math.IsInf(d, 0) || math.IsNaN(d) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// policyJSON is the JSON form of a policy: durations as Go duration strings
// ("1s", "250ms").
type policyJSON struct {
	MaxAttempts            int      `json:"maxAttempts,omitempty"`
	InitialDelay           string   `json:"initialDelay,omitempty"`
	BackoffCoefficient     float64  `json:"backoffCoefficient,omitempty"`
	MaxDelay               string   `json:"maxDelay,omitempty"`
	NonRetryableErrorCodes []string `json:"nonRetryableErrorCodes,omitempty"`
	Timeout                string   `json:"timeout,omitempty"`
}

// MarshalJSON encodes the policy with camelCase keys and duration strings.
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	j := policyJSON{
		MaxAttempts:            p.MaxAttempts,
		BackoffCoefficient:     p.BackoffCoefficient,
		NonRetryableErrorCodes: p.NonRetryableErrorCodes,
	}
	if p.InitialDelay != 0 {
		j.InitialDelay = p.InitialDelay.String()
	}
	if p.MaxDelay != 0 {
		j.MaxDelay = p.MaxDelay.String()
	}
	if p.Timeout != 0 {
		j.Timeout = p.Timeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the JSON form ({"maxAttempts":3,"initialDelay":"1s",
// …}) and validates it.
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Permanent(CodeInvalidPolicy, "retry policy: "+err.Error())
	}
	out := RetryPolicy{
		MaxAttempts:            j.MaxAttempts,
		BackoffCoefficient:     j.BackoffCoefficient,
		NonRetryableErrorCodes: j.NonRetryableErrorCodes,
	}
	for _, f := range []struct {
		name string
		s    string
		dst  *time.Duration
	}{{"initialDelay", j.InitialDelay, &out.InitialDelay}, {"maxDelay", j.MaxDelay, &out.MaxDelay}, {"timeout", j.Timeout, &out.Timeout}} {
		if f.s == "" {
			continue
		}
		d, err := time.ParseDuration(f.s)
		if err != nil {
			return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy %s=%q: not a duration like 1s or 250ms", f.name, f.s))
		}
		*f.dst = d
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*p = out
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
