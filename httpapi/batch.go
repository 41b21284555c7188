package httpapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard-io/switchboard"
)

// batcher gathers the heartbeats of every client for one window and renews
// them in one Catalog.Heartbeat call (one statement on the SQL backends;
// one per switchboard.MaxHeartbeatIDs ids): 300 clients heartbeating every
// second cost the database a few statements a second, not 300.
type batcher struct {
	cat     switchboard.Catalog
	window  time.Duration
	in      chan *beat
	flushed func() // counts each Heartbeat call
	log     *slog.Logger
	stop    <-chan struct{} // closed when the server closes
}

type beat struct {
	ctx  context.Context
	ids  []string
	done chan beatResult
}

type beatResult struct {
	missing []string
	err     error
}

func newBatcher(cat switchboard.Catalog, window time.Duration, flushed func(), log *slog.Logger, stop <-chan struct{}) *batcher {
	return &batcher{cat: cat, window: window, in: make(chan *beat), flushed: flushed, log: log, stop: stop}
}

// do renews ids with the next batch and returns those that have no row.
func (b *batcher) do(ctx context.Context, ids []string) ([]string, error) {
	bt := &beat{ctx: ctx, ids: ids, done: make(chan beatResult, 1)}
	select {
	case b.in <- bt:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.stop:
		return nil, switchboard.ErrClosed
	}
	select {
	case r := <-bt.done:
		return r.missing, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batcher) run(ctx context.Context) {
	for {
		var first *beat
		select {
		case first = <-b.in:
		case <-ctx.Done():
			return
		}
		pending := []*beat{first}
		timer := time.NewTimer(b.window)
	gather:
		for {
			select {
			case bt := <-b.in:
				pending = append(pending, bt)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				timer.Stop()
				for _, bt := range pending {
					bt.done <- beatResult{err: switchboard.ErrClosed}
				}
				return
			}
		}
		b.flush(ctx, pending)
	}
}

// flush renews the union of the pending ids. A request whose client has
// gone is left out; each gets back the missing ids among its own.
//
// The union of several clients' requests may exceed what one catalog call
// takes (switchboard.MaxHeartbeatIDs; each request is at most that): the
// requests are then renewed in several calls, each request whole in one of
// them, so that each is answered by its own call's result alone.
func (b *batcher) flush(ctx context.Context, pending []*beat) {
	var calls [][]*beat
	n := 0
	for _, bt := range pending {
		if bt.ctx.Err() != nil {
			bt.done <- beatResult{err: bt.ctx.Err()}
			continue
		}
		if len(calls) == 0 || n+len(bt.ids) > switchboard.MaxHeartbeatIDs {
			calls, n = append(calls, nil), 0
		}
		calls[len(calls)-1] = append(calls[len(calls)-1], bt)
		n += len(bt.ids)
	}
	for _, live := range calls {
		b.renew(ctx, live)
	}
}

// renew renews the ids of live in one Catalog.Heartbeat call.
func (b *batcher) renew(ctx context.Context, live []*beat) {
	var ids []string
	for _, bt := range live {
		ids = append(ids, bt.ids...)
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	began := time.Now()
	missing, err := b.cat.Heartbeat(hctx, ids...)
	cancel()
	b.flushed()
	if took := time.Since(began); took > time.Second {
		b.log.Warn("heartbeat batch slow", "ids", len(ids), "took", took.Round(time.Millisecond), "err", err)
	}
	gone := make(map[string]bool, len(missing))
	for _, id := range missing {
		gone[id] = true
	}
	for _, bt := range live {
		r := beatResult{err: err}
		if err == nil {
			for _, id := range bt.ids {
				if gone[id] {
					r.missing = append(r.missing, id)
				}
			}
		}
		bt.done <- r
	}
}
