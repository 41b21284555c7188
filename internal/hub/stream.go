package hub

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/switchboard-io/switchboard"
)

// streamDepth is how many parts a streamed first snapshot may have read
// ahead of the part being applied.
const streamDepth = 2

// errNoParts is a Streamer that returned without a part: even an empty
// catalog has a position and a clock to hand over.
var errNoParts = errors.New("snapshot stream ended without a part")

// streamFirst applies a Streamer's snapshot as the hub's first (start):
// the source reads in the caller's goroutine while another applies the
// parts already read, so a new process's first Watch takes about the
// longer of the two instead of their sum. Nobody watches yet, so when the
// read fails, what was applied of it is dropped and the mirror is empty
// again.
func (h *Hub) streamFirst(ctx context.Context, st Streamer) error {
	parts := make(chan Part, streamDepth)
	applied := make(chan struct{})
	var first Part
	begun := false
	var order []*entry
	go func() {
		defer close(applied)
		var r runs
		for p := range parts {
			h.mu.Lock()
			if !begun {
				first, begun = p, true
				h.beginSnapshot(p.Now, p.Rows)
			}
			n := len(h.moved)
			h.applyPart(p.Instances, p.Digests, first.Now)
			run := slices.Clone(h.moved[n:]) // the part's new entries
			h.mu.Unlock()
			// Sorted and merged while the source reads the next part
			// (nothing else writes to the hub before it has started).
			slices.SortFunc(run, byNameID)
			r.add(run)
		}
		order = r.merged()
	}()
	err := st.StreamSnapshot(ctx, nil, func(p Part) error {
		select {
		case parts <- p:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(parts)
	<-applied
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil && !begun {
		err = errNoParts
	}
	if err != nil {
		h.entries = make(map[string]*entry)
		h.order, h.moved, h.dropped = nil, nil, 0
		h.dl, h.bulk = nil, false
		return err
	}
	h.endSnapshot(Snapshot{Seq: first.Seq, Read: first.Read, Missing: first.Missing, Last: first.Last,
		Revision: first.Revision, Epoch: first.Epoch, Now: first.Now})
	// The order was built above: every entry of a first snapshot is new,
	// so moved holds exactly the entries, which order holds sorted.
	for _, e := range order {
		e.reorder = false
	}
	clear(h.moved)
	h.order, h.moved, h.dropped = order, nil, 0
	h.renewedAt = first.Now
	return nil
}

// PartSize is how many rows a Streamer hands over in one part.
const PartSize = 4096

// Parts gathers a Streamer's decoded rows into parts of PartSize and hands
// each to emit as it fills.
type Parts struct {
	head    Part // the position, clock and row estimate every part carries
	held    Held
	emit    func(Part) error
	ins     []switchboard.Instance
	digests []uint64 // nil until a row brings a digest
	handed  int      // rows handed over so far
	emitted bool
}

// NewParts returns a Parts that hands emit parts carrying head's Seq,
// Epoch, Now and Rows, and asks held (nil: never) in Held.
func NewParts(head Part, held Held, emit func(Part) error) *Parts {
	p := &Parts{head: head, held: held, emit: emit}
	p.ins = make([]switchboard.Instance, 0, p.room())
	return p
}

// room is the capacity of the next part: PartSize, or the rows the head's
// estimate says are left when that is fewer (at least 1; a low estimate
// only makes Next grow the part).
func (p *Parts) room() int { return min(PartSize, max(p.head.Rows-p.handed, 1)) }

// Held reports whether the hub holds the row of id as stored (see Held):
// the source then leaves it out. False when there is nothing to ask (no
// held, or no digest).
func (p *Parts) Held(id string, digest uint64, lastSeen time.Time) bool {
	return p.held != nil && digest != 0 && p.held(&p.head, id, digest, lastSeen)
}

// Next returns where to decode the next row, first handing over the part
// it completes (an error from emit ends the stream).
func (p *Parts) Next() (*switchboard.Instance, error) { return p.NextDigested(0) }

// NextDigested is Next for a row whose stored form has the given digest
// (Part.Digests).
func (p *Parts) NextDigested(digest uint64) (*switchboard.Instance, error) {
	if len(p.ins) == PartSize {
		if err := p.flush(); err != nil {
			return nil, err
		}
	}
	if p.ins == nil {
		p.ins = make([]switchboard.Instance, 0, p.room())
	}
	if digest != 0 && p.digests == nil {
		p.digests = make([]uint64, len(p.ins), cap(p.ins))
	}
	if p.digests != nil {
		p.digests = append(p.digests, digest)
	}
	p.ins = append(p.ins, switchboard.Instance{})
	return &p.ins[len(p.ins)-1], nil
}

// Close hands over the last part: the rows left, or an empty part when
// none was handed over (an empty catalog still has a position).
func (p *Parts) Close() error {
	if len(p.ins) == 0 && p.emitted {
		return nil
	}
	return p.flush()
}

// flush hands over the part gathered so far. The next part is allocated
// by the next row, if any, to the size the estimate says is left: a
// stream's last part is not a full PartSize allocation for a few rows.
func (p *Parts) flush() error {
	part := p.head
	part.Instances, part.Digests = p.ins, p.digests
	p.handed += len(p.ins)
	p.ins, p.digests = nil, nil
	p.emitted = true
	return p.emit(part)
}
