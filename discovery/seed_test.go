package discovery

import (
	"flag"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomised tests (0: a new one each run)")

// testSeed returns the seed of a randomised test and, should the test fail,
// says how to run it again with the same one.
func testSeed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: go test ./discovery/ -run '^%s$' -seed %d", t.Name(), s)
		}
	})
	return s
}
