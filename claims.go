package switchboard

import (
	"reflect"
	"sync"
)

// A process keeps at most one live Registration per id and catalog
// (Bootstrap): two would overwrite each other's row, and closing either
// would delete the row the other still keeps alive.

// claimKey names one id on one catalog.
type claimKey struct {
	cat Catalog
	id  string
}

// claims holds every id of a live Registration of this process on a
// comparable catalog: Bootstrap refuses a second one.
var (
	claimsMu sync.Mutex
	claims   = map[claimKey]struct{}{}
)

// takeClaim claims id on r's catalog for r; false when another
// Registration holds it. A catalog that cannot be a map key claims
// nothing (and always succeeds).
func (r *Registration) takeClaim(id string) bool {
	if !reflect.ValueOf(r.cat).Comparable() {
		return true
	}
	k := claimKey{r.cat, id}
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if _, held := claims[k]; held {
		return false
	}
	claims[k] = struct{}{}
	r.claim = k
	return true
}

// dropClaim gives r's claim up, if it holds one.
func (r *Registration) dropClaim() {
	if r.claim.cat == nil {
		return
	}
	claimsMu.Lock()
	defer claimsMu.Unlock()
	// Held by r: takeClaim gives a key to one Registration at a time.
	delete(claims, r.claim)
	r.claim = claimKey{}
}
