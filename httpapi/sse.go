package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// batchMax bounds how many history entries a subscriber takes per lock.
const batchMax = 256

// watchReadyWait is how long a new watch waits for the server to have read
// the catalog before it is refused.
const watchReadyWait = 10 * time.Second

// handleWatch streams the instances selected by the query as Server-Sent
// Events (the format is in the package doc).
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "last_event_id", "lastEventId")
	if err != nil {
		return err
	}
	last, err := lastEventID(r)
	if err != nil {
		return err
	}
	var cred credential // counted only when there is such a quota
	if s.opts.MaxWatchersPerToken > 0 {
		cred = s.credentialOf(r)
	}
	release, err := s.streams.take(r, cred)
	if err != nil {
		return err
	}
	defer release()
	rctx, cancel := context.WithTimeout(r.Context(), watchReadyWait)
	err = s.feed.waitReady(rctx)
	cancel()
	if err != nil {
		return s.watchRefused(err)
	}
	v := view{q}
	// An id this server's history does not hold, but that names a catalog
	// position: a stream that began on another server, or on this one
	// before a restart. The catalog resumes it from its change log, with
	// the true reasons; where the log no longer reaches, a fresh snapshot
	// follows as before.
	var resumedFrom <-chan switchboard.Event
	if last != "" {
		seq, ok, pos := s.feed.parseEventID(last)
		if wr, can := s.cat.(switchboard.WatchResumer); pos != "" && can && !(ok && s.feed.resumable(seq)) {
			ch, err := wr.WatchFrom(r.Context(), q, pos)
			switch {
			case err == nil:
				resumedFrom = ch
			case !errors.Is(err, switchboard.ErrPositionGone):
				s.log.Warn("watch: could not resume from the catalog's log; sending a snapshot", "err", err)
			}
		}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		// The headers are the whole answer: streaming on would hold the
		// connection, which the client may reuse, for ever.
		return nil
	}
	// Every write to the connection gets its own deadline, the ones the
	// buffer makes when it fills (a snapshot, a replay, a large batch)
	// included: a subscriber that reads nothing for WriteTimeout is
	// disconnected wherever its stream is stuck.
	bw := bufio.NewWriterSize(deadlineWriter{w, rc, s.opts.WriteTimeout}, 32<<10)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		return rc.Flush()
	}
	s.metrics.subscribe(1)
	defer s.metrics.subscribe(-1)
	if resumedFrom != nil {
		return s.streamResumed(r, bw, flush, resumedFrom)
	}

	// Resume from Last-Event-ID when the history still holds what came
	// after it; otherwise a snapshot (marked fresh when a resume was asked
	// for but cannot be honoured).
	cursor, resumed := int64(0), false
	if last != "" {
		if seq, ok, _ := s.feed.parseEventID(last); ok && s.feed.resumable(seq) {
			cursor, resumed = seq, true
		}
	}
	bw.WriteString("retry: 1000\n\n")
	down := ""
	if !resumed {
		cursor, down = s.writeSnapshot(bw, v, last != "")
	} else {
		down = s.replay(bw, v, &cursor)
	}
	s.writeSynced(bw, cursor, down)
	if err := flush(); err != nil {
		return nil
	}

	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	ended := false // the server's own watch of the catalog has ended for good
	for {
		es, wake, lost := s.feed.since(cursor, batchMax)
		switch {
		case lost:
			// Fell behind the history kept: start over from a snapshot.
			var down string
			cursor, down = s.writeSnapshot(bw, v, true)
			s.writeSynced(bw, cursor, down)
		case len(es) > 0:
			for i := range es {
				s.writeEntry(bw, v, &es[i])
				cursor = es[i].seq
			}
		case ended:
			// Everything up to the end, the mirror's last error event
			// (why) included, is written and flushed. Nothing will update
			// this stream again: end it, so the client reconnects (behind
			// a load balancer, to a server that can serve it; this one
			// now answers 503).
			return nil
		default:
			select {
			case <-wake:
				continue
			case <-s.feed.done:
				ended = true
				continue
			case <-keep.C:
				bw.WriteString(": keep-alive\n\n")
			case <-r.Context().Done():
				return nil
			case <-s.stop:
				return nil
			}
		}
		if err := flush(); err != nil {
			return nil // the subscriber is gone or not reading
		}
	}
}

// streamResumed streams a watch the catalog resumed from its change log
// (WatchFrom): one event per instance changed since the client's position,
// synced, then live changes. Ids carry only the catalog position, on the
// events that are one; the others leave the client's last id as it was,
// so a stream cut before synced resumes from the same point again.
func (s *Server) streamResumed(r *http.Request, bw *bufio.Writer, flush func() error, ch <-chan switchboard.Event) error {
	bw.WriteString("retry: 1000\n\n")
	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil // the catalog ended the watch; the client reconnects
			}
			id := ""
			if ev.Position != "" {
				id = "~" + ev.Position
			}
			switch ev.Kind {
			case switchboard.EventSynced:
				writeEvent(bw, id, "synced", []byte(`{"event":"synced"}`))
			case switchboard.EventError:
				msg := "the catalog is unreachable"
				if ev.Err != nil {
					msg = ev.Err.Error()
				}
				writeErrorEvent(bw, id, msg)
			default:
				st, _ := makeState(ev.Instance) // the secret's hash stays on the server
				writeEvent(bw, id, string(ev.Kind), eventJSON(ev.Kind, ev.Reason, st))
			}
			if len(ch) > 0 {
				continue // flush once the burst is written
			}
		case <-keep.C:
			bw.WriteString(": keep-alive\n\n")
		case <-r.Context().Done():
			return nil
		case <-s.stop:
			return nil
		}
		if err := flush(); err != nil {
			return nil
		}
	}
}

// lastEventID returns the id a watch resumes from: the Last-Event-ID
// header, else the query parameter last_event_id or lastEventId (the name
// EventSource polyfills send it under), "" for none. An empty value is
// absent, not an id: a polyfill sends "?lastEventId=" on its first
// connection. The two parameters may both be given only with one id.
func lastEventID(r *http.Request) (string, error) {
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		return h, nil
	}
	v := r.URL.Query() // checked by parseQuery
	a, b := v.Get("last_event_id"), v.Get("lastEventId")
	if a != "" && b != "" && a != b {
		return "", badRequest("lastEventId", fmt.Sprintf("last_event_id=%q and lastEventId=%q name different events; give one", a, b))
	}
	return cmp.Or(a, b), nil
}

// watchRefused is the 503 of a watch the mirror cannot serve (err is
// waitReady's): what happened and what the client can do about it, with
// the code of the mirror's last error (no_catalog when the catalog is
// missing, busy, else unavailable).
func (s *Server) watchRefused(err error) error {
	cause := s.feed.lastError()
	var msg string
	if errors.Is(err, errMirrorStopped) {
		// The mirror's Watch failed, or ended with the catalog handle
		// closed: nothing starts it again.
		msg = "this server's watch of the catalog has stopped and will not resume, so it serves no watch until it is restarted: watch through another server, or restart this one"
		if cause != nil && !errors.Is(cause, errMirrorStopped) {
			msg += " once the catalog answers; the catalog's last error: " + cause.Error()
		}
	} else {
		msg = fmt.Sprintf("the server has not read the catalog yet (waited %s for it): retry later", watchReadyWait)
		if cause != nil {
			msg += "; the catalog's last error: " + cause.Error()
		}
	}
	return catalogDown(msg, cause)
}

// deadlineWriter sets the connection's write deadline before each write.
type deadlineWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(p)
}

// replay writes the history after *cursor up to the current head. When the
// history no longer holds it, it writes a fresh snapshot instead. It
// returns why the mirror cannot read the catalog now ("" when it can): a
// client resuming during an outage must hear of it again, as its error
// events may lie before its cursor.
func (s *Server) replay(bw *bufio.Writer, v view, cursor *int64) (down string) {
	for {
		es, _, lost := s.feed.since(*cursor, batchMax)
		if lost {
			*cursor, down = s.writeSnapshot(bw, v, true)
			return down
		}
		if len(es) == 0 {
			return s.feed.down()
		}
		for i := range es {
			s.writeEntry(bw, v, &es[i])
			*cursor = es[i].seq
		}
	}
}

// writeSnapshot writes a snapshot marker and the visible instances as
// added events (without ids: a connection lost in the middle of a snapshot
// must not resume from inside it), and returns the seq it reflects and,
// when the mirror could not read the catalog then, why.
func (s *Server) writeSnapshot(bw *bufio.Writer, v view, fresh bool) (int64, string) {
	sts, seq, down := s.feed.snapshot(v)
	marker := struct {
		Event     string `json:"event"`
		Fresh     bool   `json:"fresh"`
		Instances int    `json:"instances"`
	}{"snapshot", fresh, len(sts)}
	b, _ := json.Marshal(marker)
	writeEvent(bw, "", "snapshot", b)
	for _, st := range sts {
		writeEvent(bw, "", string(switchboard.EventAdded), eventJSON(switchboard.EventAdded, "", st))
	}
	return seq, down
}

// writeSynced ends a snapshot or replay at cursor. When the mirror could
// not read the catalog (down), an error event follows: the set is the last
// one known, not the catalog's, as a watch of the catalog itself says.
func (s *Server) writeSynced(bw *bufio.Writer, cursor int64, down string) {
	writeEvent(bw, s.feed.eventID(cursor), "synced", []byte(`{"event":"synced"}`))
	if down != "" {
		writeErrorEvent(bw, "", down)
	}
}

func (s *Server) writeEntry(bw *bufio.Writer, v view, e *entry) {
	kind, reason, st, ok := v.translate(e)
	if !ok {
		return
	}
	var data []byte
	switch kind {
	case switchboard.EventSynced:
		data = []byte(`{"event":"synced"}`)
	case switchboard.EventError:
		writeErrorEvent(bw, s.feed.eventID(e.seq), e.errMsg)
		return
	default:
		data = eventJSON(kind, reason, st)
	}
	writeEvent(bw, s.feed.eventID(e.seq), string(kind), data)
}

// eventJSON is the watch --json form of an event, built around the
// instance's JSON encoded once by the feed.
func eventJSON(kind switchboard.EventKind, reason switchboard.Reason, st *state) []byte {
	b := make([]byte, 0, len(st.json)+64)
	b = append(b, `{"event":"`...)
	b = append(b, kind...)
	if reason != "" {
		b = append(b, `","reason":"`...)
		b = append(b, reason...)
	}
	b = append(b, `","instance":`...)
	b = append(b, st.json...)
	return append(b, '}')
}

func writeErrorEvent(bw *bufio.Writer, id, msg string) {
	data, _ := json.Marshal(struct {
		Event string `json:"event"`
		Error string `json:"error"`
	}{"error", msg})
	writeEvent(bw, id, "error", data)
}

func writeEvent(bw *bufio.Writer, id, event string, data []byte) {
	if id != "" {
		bw.WriteString("id: ")
		bw.WriteString(id)
		bw.WriteByte('\n')
	}
	bw.WriteString("event: ")
	bw.WriteString(event)
	bw.WriteString("\ndata: ")
	bw.Write(data) // JSON without raw newlines: one data line
	bw.WriteString("\n\n")
}

// filterParams are the query parameters of a list or a watch.
var filterParams = []string{"name", "type", "capability", "all"}

// parseQuery reads the filters name, type, capability and all; any other
// parameter but those of extra is refused.
func parseQuery(r *http.Request, extra ...string) (switchboard.Query, error) {
	v, err := params(r, append(extra, filterParams...)...)
	if err != nil {
		return switchboard.Query{}, err
	}
	q := switchboard.Query{Name: v.Get("name"), Type: v.Get("type"), Capability: v.Get("capability")}
	if q.Name != "" {
		// Names are sanitised as on registration: name=My_Service finds my-service.
		n, err := switchboard.SanitizeName(q.Name)
		if err != nil {
			return q, err
		}
		q.Name = n
	}
	if q.Capability != "" {
		if err := switchboard.ValidateCapability(q.Capability); err != nil {
			return q, err
		}
	}
	if a := v.Get("all"); a != "" {
		all, err := strconv.ParseBool(a)
		if err != nil {
			return q, badRequest("all", "all="+strconv.Quote(a)+": want true or false")
		}
		q.All = all
	}
	return q, nil
}

// params returns the request's query parameters after checking that each
// is one of allowed and given once: a misspelt filter (capabilities=)
// would otherwise be ignored and the answer hold everything, and of a
// parameter given twice only one would count.
func params(r *http.Request, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("", "malformed query string: "+err.Error())
	}
	keys := slices.Sorted(maps.Keys(v))
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, badRequest(k, fmt.Sprintf("unknown query parameter %q; %s %s takes %s", k, r.Method, r.URL.Path, strings.Join(allowed, ", ")))
		}
		if n := len(v[k]); n > 1 {
			return nil, badRequest(k, fmt.Sprintf("query parameter %q given %d times; give it once", k, n))
		}
	}
	return v, nil
}
