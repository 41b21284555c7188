package router

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestPolicyErrorShowsValueCut: a policy error shows the offending JSON
// value, one over 64 bytes cut at a character boundary and marked "…".
func TestPolicyErrorShowsValueCut(t *testing.T) {
	x62 := strings.Repeat("x", 62)
	for _, tt := range []struct{ value, shown string }{
		{`"three"`, `"three"`},
		{`"` + x62[2:] + `é"`, `"` + x62[2:] + `é"`},                                   // 64 bytes: shown whole
		{`"` + x62 + `éé"`, `"` + x62 + `…`},                                           // byte 64 is inside the first é
		{`"` + x62 + `ab"`, `"` + x62 + `a…`},                                          // cut between two ASCII bytes
		{`[` + strings.Repeat(`1,`, 40) + `1]`, `[` + strings.Repeat(`1,`, 31) + `1…`}, // a long array
	} {
		var p RetryPolicy
		err := json.Unmarshal([]byte(`{"maxAttempts":`+tt.value+`}`), &p)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidPolicy {
			t.Errorf("%s: err = %v, want invalid_policy", tt.value, err)
			continue
		}
		if want := "retry policy maxAttempts=" + tt.shown + ": want "; !strings.HasPrefix(e.Message, want) {
			t.Errorf("%s: message %q, want it to start %q", tt.value, e.Message, want)
		}
	}
}
