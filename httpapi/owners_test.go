package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// counting is a catalog that counts its reads of single rows and listings,
// and whose watches never show the rows whose id starts with "hidden-": the
// server's mirror lacks them, as it lacks a row another server has just
// registered, so their ownership must be read from the catalog.
type counting struct {
	switchboard.Catalog
	gets, lists, manys atomic.Int64
}

// GetMany counts and forwards to the catalog's own.
func (c *counting) GetMany(ctx context.Context, ids []string) ([]switchboard.Instance, error) {
	c.manys.Add(1)
	return c.Catalog.(switchboard.MultiGetter).GetMany(ctx, ids)
}

// withoutGetMany hides a catalog's GetMany, as a backend without it.
type withoutGetMany struct{ switchboard.Catalog }

func (c *counting) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	c.gets.Add(1)
	return c.Catalog.Get(ctx, id)
}

func (c *counting) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	c.lists.Add(1)
	return c.Catalog.List(ctx, q)
}

func (c *counting) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	in, err := c.Catalog.Watch(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(chan switchboard.Event)
	go func() {
		defer close(out)
		for ev := range in {
			if strings.HasPrefix(ev.Instance.ID, "hidden-") {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (c *counting) reads() (gets, lists int64) { return c.gets.Load() + c.manys.Load(), c.lists.Load() }

// secretHash is what the server stores under the reserved metadata key for
// a secret.
func secretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// heartbeatMany posts one heartbeat request and decodes its answer.
func heartbeatMany(t *testing.T, s *srv, items []httpapi.HeartbeatItem) httpapi.HeartbeatResponse {
	t.Helper()
	body, _ := json.Marshal(httpapi.HeartbeatRequest{Instances: items})
	code, b := call(t, "POST", s.url+"/v1/heartbeats", body)
	var hr httpapi.HeartbeatResponse
	if code != 200 || json.Unmarshal(b, &hr) != nil {
		t.Fatalf("heartbeats: %d %.300s", code, b)
	}
	return hr
}

// TestHeartbeatOwnershipReadsBounded: the ownership of heartbeat ids the
// server's mirror lacks is read from the catalog in one GetMany of those
// ids — never a listing of the catalog, nor 10,000 Gets one after another
// — with the same per-id answers: a row with a secret is renewed with it
// and refused without it (unauthorized) or with a wrong one (forbidden), a
// row without a secret is renewed, an id without a row is missing.
func TestHeartbeatOwnershipReadsBounded(t *testing.T) {
	cat := &counting{Catalog: testkit.OpenSQLite(t)}
	s := serveOn(t, cat, httpapi.Options{HeartbeatWindow: 10 * time.Millisecond, ReapInterval: -1})
	const secret = "the-owners-secret-0123456789"
	reg := func(id string, md map[string]string) {
		t.Helper()
		if _, err := cat.Register(t.Context(), switchboard.Instance{ID: id, Name: "hidden", Type: "t",
			Address: "127.0.0.1:1", TTL: time.Hour, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	owned := map[string]string{"switchboard.secret-sha256": secretHash(secret)}
	for i := 0; i < 3; i++ {
		reg(fmt.Sprintf("hidden-owned-%d", i), owned)
	}
	reg("hidden-open", nil)
	visible := register(t, s, instanceBody("visible"))
	testkit_WaitFeed(t, s, 1) // the mirror has the visible row, not the hidden ones

	var items []httpapi.HeartbeatItem
	var wantMissing []string
	items = append(items,
		httpapi.HeartbeatItem{ID: "hidden-owned-0", Secret: secret},
		httpapi.HeartbeatItem{ID: "hidden-owned-1"},                                // no secret: unauthorized
		httpapi.HeartbeatItem{ID: "hidden-owned-2", Secret: "not-the-secret-0123"}, // forbidden
		httpapi.HeartbeatItem{ID: "hidden-open"},
		httpapi.HeartbeatItem{ID: visible.Instance.ID, Secret: visible.Secret},
		httpapi.HeartbeatItem{ID: "hidden-owned-0", Secret: secret}, // twice in one request
	)
	for i := len(items); i < switchboard.MaxHeartbeatIDs; i++ {
		id := fmt.Sprintf("gone-%05d", i)
		items = append(items, httpapi.HeartbeatItem{ID: id, Secret: secret})
		wantMissing = append(wantMissing, id)
	}
	gets0, lists0 := cat.reads()
	hr := heartbeatMany(t, s, items)
	gets, lists := cat.reads()
	if gets-gets0 != 1 || lists != lists0 {
		t.Errorf("a heartbeat of %d ids, %d of them not in the mirror, cost %d Gets and GetManys and %d Lists; want one GetMany",
			len(items), len(items)-1, gets-gets0, lists-lists0)
	}
	if !slices.Equal(hr.Missing, wantMissing) {
		t.Errorf("missing: %d ids (%.200v…), want the %d gone-* ids in request order", len(hr.Missing), hr.Missing, len(wantMissing))
	}
	wantRefused := []httpapi.RefusedItem{{ID: "hidden-owned-1", Code: "unauthorized"}, {ID: "hidden-owned-2", Code: "forbidden"}}
	if len(hr.Refused) != len(wantRefused) {
		t.Fatalf("refused: %+v, want %+v", hr.Refused, wantRefused)
	}
	for i, rf := range hr.Refused {
		if rf.ID != wantRefused[i].ID || rf.Code != wantRefused[i].Code || !strings.Contains(rf.Error, rf.ID) {
			t.Errorf("refused[%d]: %+v, want %+v with an error naming the id", i, rf, wantRefused[i])
		}
	}

	// Over a catalog without GetMany, a few unknown ids (the common case
	// of a row just registered through another server) cost a Get each;
	// 10,000 cost at most 32 Gets and never a listing: the ids past those
	// are missing (their owners register them again).
	nm := serveOn(t, withoutGetMany{cat}, httpapi.Options{HeartbeatWindow: 10 * time.Millisecond, ReapInterval: -1})
	testkit_WaitFeed(t, nm, 1)
	gets0, lists0 = cat.reads()
	hr = heartbeatMany(t, nm, []httpapi.HeartbeatItem{{ID: "hidden-open"}, {ID: "hidden-owned-0", Secret: secret}, {ID: "gone-x"}})
	gets, lists = cat.reads()
	if gets-gets0 != 3 || lists != lists0 {
		t.Errorf("a heartbeat of 3 ids not in the mirror cost %d Gets and %d Lists; want 3 Gets", gets-gets0, lists-lists0)
	}
	if !slices.Equal(hr.Missing, []string{"gone-x"}) || len(hr.Refused) != 0 {
		t.Errorf("3 ids: %+v", hr)
	}
	var unknown []httpapi.HeartbeatItem
	for i := range switchboard.MaxHeartbeatIDs {
		unknown = append(unknown, httpapi.HeartbeatItem{ID: fmt.Sprintf("unknown-%05d", i)})
	}
	gets0, lists0 = cat.reads()
	hr = heartbeatMany(t, nm, unknown)
	gets, lists = cat.reads()
	if gets-gets0 > 32 || lists != lists0 || len(hr.Missing) != len(unknown) {
		t.Errorf("10,000 unknown ids without GetMany: %d Gets, %d Lists, %d missing", gets-gets0, lists-lists0, len(hr.Missing))
	}
}

// tablesGone is a catalog whose reads of rows the server's mirror lacks
// fail as PostgreSQL's do when the catalog's tables are gone (the
// database restored empty): with switchboard.ErrNoCatalog. Its writes go
// through, as PostgreSQL's Register and Heartbeat create the tables again.
type tablesGone struct{ *counting }

func (c tablesGone) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	c.gets.Add(1)
	return switchboard.Instance{}, fmt.Errorf("catalog tables missing: %w", switchboard.ErrNoCatalog)
}

func (c tablesGone) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	c.lists.Add(1)
	return nil, fmt.Errorf("catalog tables missing: %w", switchboard.ErrNoCatalog)
}

func (c tablesGone) GetMany(ctx context.Context, ids []string) ([]switchboard.Instance, error) {
	c.manys.Add(1)
	return nil, fmt.Errorf("catalog tables missing: %w", switchboard.ErrNoCatalog)
}

// TestOwnershipWithoutCatalog: an ownership read that finds no catalog
// means no row, not an outage, so a registration through the server
// reaches the catalog (which creates its tables again) instead of being
// refused with 503 for ever.
func TestOwnershipWithoutCatalog(t *testing.T) {
	cat := tablesGone{&counting{Catalog: testkit.OpenSQLite(t)}}
	s := serveOn(t, cat, httpapi.Options{})
	body := instanceBody("restored")
	body["id"] = "hidden-restored"
	r := register(t, s, body)
	if r.Instance.ID != "hidden-restored" || r.Secret == "" {
		t.Fatalf("registered %+v", r)
	}
	if _, err := cat.Catalog.Get(t.Context(), "hidden-restored"); err != nil {
		t.Fatalf("the registration did not reach the catalog: %v", err)
	}
	// Unknown ids (one GetMany): missing, not a 503 for the whole
	// request.
	for _, n := range []int{3, 40} {
		var items []httpapi.HeartbeatItem
		for i := range n {
			items = append(items, httpapi.HeartbeatItem{ID: fmt.Sprintf("hidden-%d", i)})
		}
		if hr := heartbeatMany(t, s, items); len(hr.Missing) != n {
			t.Fatalf("%d unknown ids: %d missing, want all (%+v)", n, len(hr.Missing), hr)
		}
	}
	if cat.gets.Load() < 1 || cat.manys.Load() != 2 || cat.lists.Load() != 0 {
		t.Fatalf("%d Gets, %d GetManys and %d Lists: the test did not exercise both ownership reads", cat.gets.Load(), cat.manys.Load(), cat.lists.Load())
	}
}

// orderedGetErrors is a catalog whose Get of "first-bad" and "second-bad"
// fails, the second before the first: the Get of first-bad returns only
// once that of second-bad has.
type orderedGetErrors struct {
	switchboard.Catalog
	secondDone chan struct{}
}

var errFirstBad, errSecondBad = errors.New("get of first-bad failed"), errors.New("get of second-bad failed")

func (c orderedGetErrors) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	switch id {
	case "first-bad":
		select {
		case <-c.secondDone:
		case <-ctx.Done():
		}
		return switchboard.Instance{}, errFirstBad
	case "second-bad":
		defer close(c.secondDone)
		return switchboard.Instance{}, errSecondBad
	}
	return c.Catalog.Get(ctx, id)
}

// TestOwnershipReadErrorInRequestOrder: when the Gets of several ids'
// ownership fail, the request fails with the error of the first failing id
// in the request's order, not with whichever failed first in time.
func TestOwnershipReadErrorInRequestOrder(t *testing.T) {
	cat := orderedGetErrors{Catalog: testkit.OpenSQLite(t), secondDone: make(chan struct{})}
	s := serveOn(t, cat, httpapi.Options{ReapInterval: -1})
	body, _ := json.Marshal(httpapi.HeartbeatRequest{Instances: []httpapi.HeartbeatItem{
		{ID: "unknown-1"}, {ID: "first-bad"}, {ID: "unknown-2"}, {ID: "second-bad"}, {ID: "unknown-3"},
	}})
	code, b := call(t, "POST", s.url+"/v1/heartbeats", body)
	expectError(t, code, b, 503, "unavailable", "")
	if !strings.Contains(string(b), errFirstBad.Error()) || strings.Contains(string(b), errSecondBad.Error()) {
		t.Fatalf("heartbeats: %s; want the error of first-bad (first in the request), not that of second-bad", b)
	}
}
