package grpcwire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/router"
)

// TestWireText pins how an error's code and message are cut before they
// cross the wire: at a character boundary, the code silently, the message
// marked with how many bytes it lost; invalid UTF-8 becomes U+FFFD first.
func TestWireText(t *testing.T) {
	long := "a" + strings.Repeat("é", 5000) // byte 8192 is inside an é
	for _, tt := range []struct {
		name          string
		in            router.Error
		code, message string
	}{
		{"short", router.Error{Code: "quota", Message: "over"}, "quota", "over"},
		{"empty code", router.Error{Message: "m"}, router.CodeInternal, "m"},
		{"invalid UTF-8", router.Error{Code: "q\xff", Message: "m\xff"}, "q\uFFFD", "m\uFFFD"},
		{"message at the limit", router.Error{Code: "c", Message: strings.Repeat("m", MaxErrorMessageLen)}, "c", strings.Repeat("m", MaxErrorMessageLen)},
		{"long message", router.Error{Code: "c", Message: long},
			"c", "a" + strings.Repeat("é", 4095) + fmt.Sprintf("… (%d more bytes cut)", len(long)-8191)},
		{"long code", router.Error{Code: "x" + strings.Repeat("日", 100), Message: "m"}, "x" + strings.Repeat("日", 85), "m"},
	} {
		code, msg := wireText(&tt.in)
		if code != tt.code || msg != tt.message {
			t.Errorf("%s: wireText = %.80q, %.80q (%d bytes); want %.80q, %.80q (%d bytes)", tt.name, code, msg, len(msg), tt.code, tt.message, len(tt.message))
		}
	}
}
