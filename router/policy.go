package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard/internal/textcut"
)

// Retry policy defaults and limits.
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
// nothing retries implicitly. Zero fields take the defaults above
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
	// Name what the user set: a limit left at zero is the default, and an
	// error quoting it as if it had been written would send them looking
	// for a value that is not in their policy.
	if d := p.WithDefaults(); d.MaxDelay < d.InitialDelay {
		switch {
		case p.MaxDelay == 0:
			return bad("initialDelay", p.InitialDelay, fmt.Sprintf("must not exceed maxDelay, which is not set and defaults to %v; set maxDelay to at least %v", DefaultMaxDelay, p.InitialDelay))
		case p.InitialDelay == 0:
			return bad("maxDelay", p.MaxDelay, fmt.Sprintf("must not be below initialDelay, which is not set and defaults to %v; set initialDelay to at most %v", DefaultInitialDelay, p.MaxDelay))
		default:
			return bad("maxDelay", p.MaxDelay, fmt.Sprintf("must not be below initialDelay=%v", p.InitialDelay))
		}
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

// Keys of the policy's JSON form.
const (
	keyMaxAttempts            = "maxAttempts"
	keyInitialDelay           = "initialDelay"
	keyBackoffCoefficient     = "backoffCoefficient"
	keyMaxDelay               = "maxDelay"
	keyNonRetryableErrorCodes = "nonRetryableErrorCodes"
	keyTimeout                = "timeout"
)

// policyKeys are the keys of the JSON form, in the order MarshalJSON
// writes them.
var policyKeys = []string{keyMaxAttempts, keyInitialDelay, keyBackoffCoefficient, keyMaxDelay, keyNonRetryableErrorCodes, keyTimeout}

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
// …}) and validates it. Keys are exact (case-sensitive) and a key the form
// does not have is refused, naming it: a misspelt key would otherwise be
// dropped and its default used without a word. A null or absent value
// means the default.
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Permanent(CodeInvalidPolicy, fmt.Sprintf(`retry policy: got a JSON %s, want an object like {"maxAttempts":3,"initialDelay":"1s"}`, te.Value))
		}
		return Permanent(CodeInvalidPolicy, "retry policy: not valid JSON: "+err.Error())
	}
	if err := unknownPolicyKeys(raw); err != nil {
		return err
	}
	var out RetryPolicy
	for _, f := range []struct {
		key  string
		dst  any
		want string
	}{
		{keyMaxAttempts, &out.MaxAttempts, "a whole number from 1 to 10"},
		{keyBackoffCoefficient, &out.BackoffCoefficient, "a number from 1 to 100, like 2.0"},
		{keyNonRetryableErrorCodes, &out.NonRetryableErrorCodes, `a list of error codes, like ["quota_exceeded"]`},
	} {
		if v, ok := raw[f.key]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy %s=%s: want %s", f.key, shortJSON(v), f.want))
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{keyInitialDelay, &out.InitialDelay}, {keyMaxDelay, &out.MaxDelay}, {keyTimeout, &out.Timeout}} {
		v, ok := raw[f.key]
		if !ok {
			continue
		}
		var s string // null leaves it empty: the default
		if err := json.Unmarshal(v, &s); err != nil {
			return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy %s=%s: want a duration string like \"1s\" or \"250ms\"", f.key, shortJSON(v)))
		}
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy %s=%q: not a duration like 1s or 250ms", f.key, s))
		}
		*f.dst = d
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*p = out
	return nil
}

// shortJSON is v for an error message: cut after at most 64 bytes, at a
// UTF-8 character boundary, and marked with "…".
func shortJSON(v json.RawMessage) string {
	return textcut.Cut(string(v), 64)
}

// unknownPolicyKeys refuses the keys of raw the JSON form does not have,
// naming each with the key it most likely meant.
func unknownPolicyKeys(raw map[string]json.RawMessage) error {
	var bad []string
	for k := range raw {
		if !slices.Contains(policyKeys, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	parts := make([]string, len(bad))
	for i, k := range bad {
		parts[i] = strconv.Quote(k)
		if hint := policyKeyHint(k); hint != "" {
			parts[i] += " (" + hint + ")"
		}
	}
	what := "unknown key"
	if len(bad) > 1 {
		what += "s"
	}
	return Permanent(CodeInvalidPolicy, fmt.Sprintf("retry policy: %s %s; the keys are %s", what, strings.Join(parts, ", "), strings.Join(policyKeys, ", ")))
}

// policyKeyHint suggests the key an unknown key k most likely meant: the
// same key in other letter case, the duration key of a TinySystems-style
// "…Ms" key (the TinyNode CR's edge retryPolicy counts milliseconds), or a
// key one or two edits away. It returns "" when nothing is close.
func policyKeyHint(k string) string {
	for _, known := range policyKeys {
		if strings.EqualFold(k, known) {
			return fmt.Sprintf("keys are case-sensitive: did you mean %q?", known)
		}
	}
	if base, ok := strings.CutSuffix(k, "Ms"); ok {
		for _, known := range []string{keyInitialDelay, keyMaxDelay, keyTimeout} {
			if strings.EqualFold(base, known) {
				return fmt.Sprintf("use %q with a duration string such as \"500ms\"", known)
			}
		}
	}
	best, bestDist, lk := "", 3, strings.ToLower(k)
	for _, known := range policyKeys {
		if d := editDistance(lk, strings.ToLower(known), bestDist); d < bestDist {
			best, bestDist = known, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b, or limit when it is
// limit or more. Strings whose lengths differ by limit or more are not
// compared, so the table stays as small as the policy keys.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
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
