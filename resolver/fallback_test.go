package resolver

import (
	"encoding/json"
	"testing"
)

// A transport-failure config whose first child policy is not registered
// (outlier detection without resolver/ejection imported) runs the next
// one: the weighted policy alone.
func TestTransportConfigFallsBackToTheWeightedPolicy(t *testing.T) {
	cfg, err := transportBuilder{}.ParseConfig(json.RawMessage(`{"childPolicy":[{"not_registered_here":{}},{"` + WeightedName + `":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.(*transportConfig); c.child != WeightedName {
		t.Fatalf("child %q, want %q", c.child, WeightedName)
	}
}
