package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Watch implements switchboard.Catalog over the server's SSE stream: the
// current set as added, synced, then changes. When the connection drops,
// or goes silent for Config.WatchIdleTimeout, it sends one error event,
// reconnects with backoff and resumes from the last event id; when the
// server can no longer replay from there it sends a fresh snapshot, which
// this client diffs against what it had delivered, so the caller gets
// exactly the differences: no duplicate added, no missed removed. Of a
// DSN listing several servers, the next connection goes to the next
// server at once, with the same last event id, and the error event is
// sent only when no server takes the watch; when that server cannot
// resume from the id, its snapshot is diffed the same way, and an
// instance that did not change meanwhile gets no event. A
// connection whose response headers do not arrive within
// Config.RequestTimeout has failed. The first connection's failure is
// returned.
func (c *Client) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	if c.closed.Load() {
		return nil, switchboard.ErrClosed
	}
	wctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(c.ctx, cancel)
	w := &watch{c: c, q: q, ctx: wctx, out: make(chan switchboard.Event), known: map[string]switchboard.Instance{}}
	resp, err := w.connect()
	if err != nil {
		stopOnClose()
		cancel()
		return nil, err
	}
	c.life.Lock()
	if c.closed.Load() { // closed while connecting
		c.life.Unlock()
		resp.close()
		stopOnClose()
		cancel()
		return nil, switchboard.ErrClosed
	}
	c.watchers.Add(1)
	c.wg.Add(1)
	c.life.Unlock()
	go func() {
		defer c.wg.Done()
		defer c.watchers.Add(-1)
		defer close(w.out)
		defer stopOnClose()
		defer cancel()
		w.run(resp)
	}()
	return w.out, nil
}

type watch struct {
	c      *Client
	q      switchboard.Query
	ctx    context.Context
	out    chan switchboard.Event
	known  map[string]switchboard.Instance // what the caller has been told is there
	lastID string
	srv    *server // the server of the current connection
	// movedAt is when a lost stream was last resumed on another server at
	// once, without an error event.
	movedAt time.Time
	// A snapshot being received: its instances, until synced.
	snap   map[string]switchboard.Instance
	order  []string
	inSnap bool
	outage bool // an error event was sent for the current disconnection
	synced bool // the current connection has delivered a synced event
}

// Reconnection backoff: from minBackoff, doubling to maxBackoff. It starts
// over only once a connection has delivered a synced event: a server (or a
// proxy in front of it) that accepts the stream and drops it at once is
// retried ever more slowly, not ten times a second by every client.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// maxLine bounds one line of the stream and the data of one event. The
// server's largest event is an instance (a request body is at most 1 MiB;
// JSON escaping may grow it several-fold); a stream that exceeds it is not
// a switchboard server's, and is dropped instead of being held in memory.
const maxLine = 16 << 20

// errLineTooLong ends a connection whose line or event exceeds maxLine.
var errLineTooLong = fmt.Errorf("watch stream: a line or event larger than %d MiB (not a switchboard server's stream?)", maxLine>>20)

// errIdle ends a connection on which nothing has arrived for the idle
// timeout: the server sends a keep-alive comment every 15 s (by default)
// when it has nothing else, so silence means the connection is dead.
var errIdle = errors.New("no data from the server (not even a keep-alive) within the watch idle timeout")

// conn is one connection of a watch: its response, and the timer that
// ends it after WatchIdleTimeout without data.
type conn struct {
	resp   *http.Response
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *time.Timer
}

func (cn *conn) close() {
	cn.idle.Stop()
	cn.resp.Body.Close()
	cn.cancel(nil)
}

// err is the reason the connection ended: errIdle when it went silent.
func (cn *conn) err(err error) error {
	if cause := context.Cause(cn.ctx); errors.Is(cause, errIdle) {
		return errIdle
	}
	return err
}

// connect opens one connection of the watch: to the current server, or
// when it cannot be reached, does not answer in time or answers 5xx, to
// the next (see servers), each at most once. It returns the last error.
// The last event id goes to whichever server answers: a server that
// cannot resume from another's id sends a snapshot, which read diffs
// against what the caller was told.
func (w *watch) connect() (*conn, error) {
	cands := w.c.srv.order()
	var err error
	for i, s := range cands {
		var cn *conn
		cn, err = w.connectTo(s)
		if err == nil {
			w.c.srv.ok(s)
			if w.srv != nil && w.srv != s {
				w.c.log.Debug("switchboard server: watch moved to another server", "from", w.srv.name, "server", s.name)
			}
			w.srv = s
			return cn, nil
		}
		if !movesOn(err) || w.ctx.Err() != nil {
			return nil, err
		}
		w.c.srv.failed(s)
		if i+1 < len(cands) {
			w.c.log.Debug("switchboard server: watch connection failed; trying the next server", "server", s.name, "next", cands[i+1].name, "err", err)
		}
	}
	return nil, err
}

// connectTo opens one connection of the watch to s. Its response headers
// must arrive within Config.RequestTimeout (when set) and
// WatchIdleTimeout; the stream that follows is bounded by WatchIdleTimeout
// alone.
func (w *watch) connectTo(s *server) (*conn, error) {
	ctx, cancel := context.WithCancelCause(w.ctx)
	idle := time.AfterFunc(w.c.cfg.WatchIdleTimeout, func() { cancel(errIdle) })
	var headers *time.Timer
	if rt := w.c.cfg.RequestTimeout; rt > 0 {
		headers = time.AfterFunc(rt, func() { cancel(errNoAnswer) })
	}
	cn, err := w.dial(ctx, s)
	// A timer that fired (or is firing) after the headers came has ended,
	// or is about to end, the connection's context: it is of no use.
	if fired := headers != nil && !headers.Stop(); fired && err == nil {
		cn.Body.Close()
		err = w.c.noAnswer(http.MethodGet, w.url(s))
	}
	if err != nil {
		idle.Stop()
		if w.ctx.Err() == nil {
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errNoAnswer):
				err = w.c.noAnswer(http.MethodGet, w.url(s))
			case errors.Is(cause, errIdle):
				err = fmt.Errorf("switchboard server %s: %w", s.name, errIdle)
			}
		}
		cancel(nil)
		return nil, err
	}
	return &conn{resp: cn, ctx: ctx, cancel: cancel, idle: idle}, nil
}

// url is the watch's URL on s.
func (w *watch) url(s *server) string { return s.base + "/v1/watch" + queryString(w.q) }

func (w *watch) dial(ctx context.Context, s *server) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url(s), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if w.lastID != "" {
		req.Header.Set("Last-Event-ID", w.lastID)
	}
	w.c.auth(req)
	resp, err := s.http.Do(req)
	if err != nil {
		if w.c.closed.Load() {
			return nil, switchboard.ErrClosed
		}
		return nil, transportError(ctx, s.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	// A 200 that is not an event stream (a DSN naming another web
	// service, a proxy's login page) would be read as a stream without
	// events, dropped, and reconnected to forever.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		ct := resp.Header.Get("Content-Type")
		if ct == "" {
			ct = "no Content-Type"
		}
		return nil, fmt.Errorf("switchboard server %s: GET /v1/watch answered with %s, not text/event-stream: is the DSN a switchboard server's?", s.name, ct)
	}
	return resp, nil
}

// pause waits about d (see jitter), false when the watch ends first.
func (w *watch) pause(d time.Duration) bool {
	if w.c.pause != nil {
		return w.c.pause(w.ctx, d)
	}
	t := time.NewTimer(jitter(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// jitter draws a wait between d/2 and d, so that the clients of a server
// that restarts do not all reconnect in the same instant, and again at
// each doubling after it.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d-d/2+1)
}

func (w *watch) run(cn *conn) {
	backoff := minBackoff
	for {
		w.synced = false
		err := cn.err(w.read(cn.resp.Body, cn.idle))
		cn.close()
		if w.ctx.Err() != nil {
			return
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if w.synced {
			backoff = minBackoff // a working connection: the next drop starts over
		}
		// The next connection goes to the next server, if there is one.
		lost := w.srv
		w.c.srv.failed(lost)
		// A working stream lost where other servers are: the next one is
		// asked at once, and the caller hears of an outage only when no
		// server takes the watch. At most once a second, so that servers
		// that take a watch and drop it go through the backoff below.
		if w.synced && w.c.srv.several() && time.Since(w.movedAt) >= time.Second {
			w.movedAt = time.Now()
			next, cerr := w.connect()
			if cerr == nil {
				w.c.log.Debug("switchboard server: watch stream lost; resumed on the next server", "lost", lost.name, "server", w.srv.name, "err", err)
				cn = next
				continue
			}
			if w.ctx.Err() != nil {
				return
			}
			err = errors.Join(err, cerr)
		}
		for failed := 0; ; failed++ {
			if !w.outage {
				w.outage = true
				if !w.send(switchboard.Event{Kind: switchboard.EventError, Err: fmt.Errorf("switchboard server %s: watch stream lost: %w", lost.name, err)}) {
					return
				}
			}
			if !w.pause(backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			cn, err = w.connect()
			if err == nil {
				break
			}
			if w.ctx.Err() != nil {
				return
			}
			// The caller heard of the outage once (its error event); the
			// first failed reconnection is logged where an operator sees
			// it (a rotated token, a server that refuses the watch), the
			// retries that follow at debug level.
			if failed == 0 {
				w.c.log.Warn("switchboard server: watch reconnect failed; retrying", "err", err)
			} else {
				w.c.log.Debug("switchboard server: watch reconnect failed", "err", err)
			}
		}
	}
}

func (w *watch) send(ev switchboard.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// read consumes one connection's stream until it ends, resetting idle
// (when not nil) whenever a line arrives.
func (w *watch) read(body io.Reader, idle *time.Timer) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var id, event string
	var data []byte
	hasID := false
	// A connection lost inside a snapshot resumes from the last id before
	// it: the partial snapshot is dropped.
	w.inSnap = false
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if idle != nil {
			idle.Reset(w.c.cfg.WatchIdleTimeout)
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if event != "" {
				// A caller slow to take the events is not a silent
				// server: the idle timeout does not run meanwhile.
				if idle != nil {
					idle.Stop()
				}
				if !w.dispatch(event, data) {
					return w.ctx.Err()
				}
				if idle != nil {
					idle.Reset(w.c.cfg.WatchIdleTimeout)
				}
				if hasID {
					w.lastID = id
				}
			}
			id, event, data, hasID = "", "", nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id, hasID = value, true
		case "event":
			event = value
		case "data":
			if len(data)+len(value) > maxLine {
				return errLineTooLong
			}
			data = append(data, value...)
		}
	}
}

// readLine reads one line (with its '\n') of at most maxLine bytes.
func readLine(br *bufio.Reader) (string, error) {
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(long)+len(frag) > maxLine {
			return "", errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			long = append(long, frag...)
			continue
		}
		if err != nil {
			return "", err
		}
		if long == nil {
			return string(frag), nil
		}
		return string(append(long, frag...)), nil
	}
}

// wireEvent is the data of one SSE event.
type wireEvent struct {
	Event    string                `json:"event"`
	Reason   switchboard.Reason    `json:"reason"`
	Instance *switchboard.Instance `json:"instance"`
	Error    string                `json:"error"`
	Fresh    bool                  `json:"fresh"`
	Revision int64                 `json:"revision"`
}

// dispatch applies one event; false when the watch has ended.
func (w *watch) dispatch(event string, data []byte) bool {
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		w.c.log.Warn("switchboard server: undecodable watch event", "event", event, "err", err)
		return true
	}
	switch event {
	case "snapshot":
		w.inSnap, w.snap, w.order = true, map[string]switchboard.Instance{}, nil
		return true
	case "synced":
		if w.inSnap {
			w.inSnap = false
			if !w.applySnapshot() {
				return false
			}
		}
		w.outage, w.synced = false, true
		return w.send(switchboard.Event{Kind: switchboard.EventSynced})
	case "error":
		return w.send(switchboard.Event{Kind: switchboard.EventError, Err: errors.New(ev.Error)})
	}
	if ev.Instance == nil {
		return true
	}
	in := *ev.Instance
	if w.inSnap {
		if event == string(switchboard.EventAdded) {
			if _, dup := w.snap[in.ID]; !dup {
				w.order = append(w.order, in.ID)
			}
			w.snap[in.ID] = in
		}
		return true
	}
	switch switchboard.EventKind(event) {
	case switchboard.EventAdded, switchboard.EventUpdated:
		old, had := w.known[in.ID]
		if had && in.Revision != 0 && (in.Revision < old.Revision || in.Revision == old.Revision && same(old, in)) {
			// An older state than the one shown (never go back), or the
			// same one again (a resumed stream may repeat a change).
			return true
		}
		w.known[in.ID] = in
		kind := switchboard.EventKind(event)
		// Never a duplicate added, nor an update of something not shown.
		if had {
			kind = switchboard.EventUpdated
		} else {
			kind = switchboard.EventAdded
		}
		return w.send(switchboard.Event{Kind: kind, Instance: in, Revision: in.Revision})
	case switchboard.EventRemoved:
		if _, had := w.known[in.ID]; !had {
			return true
		}
		old := w.known[in.ID]
		delete(w.known, in.ID)
		if in.Name == "" {
			// A removal resumed from the catalog's log names only the id:
			// the state shown last is the instance that left.
			in = old
		}
		return w.send(switchboard.Event{Kind: switchboard.EventRemoved, Reason: ev.Reason, Instance: in,
			Revision: max(ev.Revision, in.Revision, old.Revision)})
	}
	return true
}

// applySnapshot sends the differences between what the caller was told and
// the snapshot: added, updated, removed.
func (w *watch) applySnapshot() bool {
	for _, id := range w.order {
		in := w.snap[id]
		old, had := w.known[id]
		switch {
		case !had:
			if !w.send(switchboard.Event{Kind: switchboard.EventAdded, Instance: in, Revision: in.Revision}) {
				return false
			}
		case in.Revision != 0 && in.Revision < old.Revision:
			w.snap[id] = old // the snapshot is older than what was shown: keep it
		case !same(old, in):
			if !w.send(switchboard.Event{Kind: switchboard.EventUpdated, Instance: in, Revision: in.Revision}) {
				return false
			}
		}
	}
	gone := make([]string, 0)
	for id := range w.known {
		if _, ok := w.snap[id]; !ok {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	var now time.Time
	if len(gone) > 0 {
		now = w.catalogNow()
	}
	for _, id := range gone {
		in := w.known[id]
		// Gone from the snapshot: the stream that would have said why is
		// lost (a restarted or another server). Past its TTL by the
		// catalog's clock, which stamped LastSeen, it expired; otherwise
		// the snapshot cannot tell (unknown), and no reason is made up.
		reason := switchboard.ReasonUnknown
		if in.Stale || now.Sub(in.LastSeen) > in.TTL {
			reason = switchboard.ReasonExpired
			in.Stale = true
		}
		if !w.send(switchboard.Event{Kind: switchboard.EventRemoved, Reason: reason, Instance: in, Revision: in.Revision}) {
			return false
		}
	}
	w.known, w.snap, w.order = w.snap, nil, nil
	return true
}

// catalogNow is the catalog's clock (the server's /v1/now), which stamps
// every LastSeen: this process's clock may be off by more than a TTL. If
// the server does not answer within 2 s, this process's clock it is.
func (w *watch) catalogNow() time.Time {
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	defer cancel()
	if now, err := w.c.Now(ctx); err == nil {
		return now
	}
	return time.Now()
}

func same(a, b switchboard.Instance) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Address == b.Address &&
		slices.Equal(a.Capabilities, b.Capabilities) && a.Version == b.Version &&
		maps.Equal(a.Metadata, b.Metadata) && string(a.Components) == string(b.Components) &&
		a.TTL == b.TTL && a.RegisteredAt.Equal(b.RegisteredAt) && a.Stale == b.Stale
}
