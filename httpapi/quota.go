package httpapi

import (
	"fmt"
	"net/http"
	"sync"
)

// streamQuota counts the open watch streams, in all and by client
// (clientKey), against Options.MaxWatchers and MaxWatchersPerClient.
type streamQuota struct {
	max, perClient int
	mu             sync.Mutex
	total          int
	by             map[string]int
}

// take counts one more stream of r's client, or says which quota it
// would exceed; release gives it back.
func (q *streamQuota) take(r *http.Request) (release func(), err error) {
	k := clientKey(r)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.total >= q.max:
		return nil, tooMany(fmt.Sprintf("this server has %d watch streams open, its limit: retry later, or watch through another server", q.total))
	case q.by[k] >= q.perClient:
		return nil, tooMany(fmt.Sprintf("this client has %d watch streams open, the limit of one client: close one (one stream with filters serves many views)", q.by[k]))
	}
	q.total++
	q.by[k]++
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.total--
		if q.by[k]--; q.by[k] == 0 {
			delete(q.by, k)
		}
	}, nil
}

// instanceQuota refuses a registration that would add a row when the
// server's mirror already holds MaxInstances, and any registration of
// body bytes when its instances already hold MaxInstanceBytes.
func (s *Server) instanceQuota(newRow bool, body int) error {
	n, b := s.feed.size()
	if newRow && n >= s.opts.MaxInstances {
		return tooMany(fmt.Sprintf("the catalog holds %d instances, this server's limit (http.max_instances): register again once rows expire or are reaped", n))
	}
	if b+int64(body) > s.opts.MaxInstanceBytes {
		return tooMany(fmt.Sprintf("the catalog's instances hold %d MiB, this server's limit is %d MiB: register again once rows expire or are reaped, or register smaller documents",
			b>>20, s.opts.MaxInstanceBytes>>20))
	}
	return nil
}
