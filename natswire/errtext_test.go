package natswire

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/router"
)

// TestReplyHeaderErrorText pins the x-error text of a failure: CR and LF
// become spaces, and a text over maxErrorText bytes is cut at a character
// boundary, the "…" marking the cut within those bytes.
func TestReplyHeaderErrorText(t *testing.T) {
	for _, tt := range []struct {
		name, msg, want string
	}{
		{"short", "field x\r\nis missing", "field x is missing"},
		{"at the limit", strings.Repeat("e", maxErrorText), strings.Repeat("e", maxErrorText)},
		{"one byte over", strings.Repeat("e", maxErrorText+1), strings.Repeat("e", maxErrorText-3) + "…"},
		{"cut inside a character", strings.Repeat("e", maxErrorText-4) + "日本", strings.Repeat("e", maxErrorText-4) + "…"},
	} {
		h := replyHeader(nil, router.Permanent("c", tt.msg))
		if got := h.Get(HeaderError); got != tt.want {
			t.Errorf("%s: x-error = %.60q… (%d bytes), want %.60q… (%d bytes)", tt.name, got, len(got), tt.want, len(tt.want))
		}
	}
	if got := replyHeader(nil, errors.New("plain")).Get(HeaderError); got != "plain" {
		t.Errorf("plain error: x-error = %q", got)
	}
}
