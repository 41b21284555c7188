package natswire

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard/natswire/embedded"
	"github.com/switchboard-io/switchboard/router"
)

// TestJetStreamReceiverKilled: a receiver dies (its connection cut, no
// graceful stop) in the middle of 10,000 durable messages; once another
// replica is up every message has been processed and acknowledged, and no
// message was processed again after its handler's acknowledgement was
// confirmed.
func TestJetStreamReceiverKilled(t *testing.T) {
	const total = 10000
	b := startBroker(t, t.TempDir(), -1)
	opts := Options{Mode: JetStream, AckWait: 2 * time.Second, InProgressInterval: 500 * time.Millisecond, GracePeriod: time.Second}

	var mu sync.Mutex
	events := make(map[string][]byte, total) // id → 'p' processed, 'a' ack confirmed, 'f' ack failed
	var processed atomic.Int64
	handler := func(ctx context.Context, m *router.Message) ([]byte, error) {
		mu.Lock()
		events[m.ID] = append(events[m.ID], 'p')
		mu.Unlock()
		processed.Add(1)
		time.Sleep(50 * time.Microsecond) // a little work, so the kill finds messages in flight
		return nil, nil
	}
	hook := func(h nats.Header, err error) {
		ev := byte('a')
		if err != nil {
			ev = 'f'
		}
		mu.Lock()
		id := h.Get(HeaderMessageID)
		events[id] = append(events[id], ev)
		mu.Unlock()
	}
	startReplica := func() (*nats.Conn, *Receiver) {
		nc := connect(t, b.ClientURL())
		w := newWire(t, nc, opts)
		w.ackHook = hook
		return nc, listen(t, w, "durable", handler)
	}
	ncA, recvA := startReplica()

	sender := newWire(t, connect(t, b.ClientURL()), opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var pubErr atomic.Pointer[error]
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < total; i += 8 {
				if err := sender.Publish(ctx, &router.Message{ID: strconv.Itoa(i), To: "f.durable.n:in", Payload: []byte("x")}); err != nil {
					pubErr.Store(&err)
					return
				}
			}
		}()
	}
	waitUntilT(t, "the first replica processed 3,000", func() bool { return processed.Load() >= 3000 })
	ncA.Close() // the kill: no drain, no acks from now on
	killedAt := processed.Load()
	recvA.Close()
	startReplica()
	wg.Wait()
	if p := pubErr.Load(); p != nil {
		t.Fatalf("publish: %v", *p)
	}
	// Done when every message was processed and the work queue is empty
	// (every message acknowledged: an ack can land although its
	// confirmation was lost with the killed connection, so the stream, not
	// the hook, says what was acknowledged).
	js, err := jetstream.New(connect(t, b.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	left := func() (processedIDs int, inStream uint64) {
		mu.Lock()
		processedIDs = len(events)
		mu.Unlock()
		st, err := js.Stream(ctx, DefaultStream)
		if err != nil {
			return processedIDs, 1 << 62
		}
		info, err := st.Info(ctx)
		if err != nil {
			return processedIDs, 1 << 62
		}
		return processedIDs, info.State.Msgs
	}
	// A generous bound: 10,000 messages under -race on a shared machine.
	deadline := time.Now().Add(3 * time.Minute)
	for n, msgs := left(); n < total || msgs > 0; n, msgs = left() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages processed, %d still in the stream", n, total, msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != total {
		t.Fatalf("%d distinct messages processed, want %d", len(events), total)
	}
	again := 0
	for id, ev := range events {
		acked := false
		for _, e := range ev {
			switch {
			case e == 'p' && acked:
				t.Fatalf("message %s processed again after a confirmed ack: %s", id, ev)
			case e == 'a':
				acked = true
			}
		}
		if bytes.Count(ev, []byte{'p'}) > 1 {
			again++
		}
	}
	t.Logf("killed after %d processed; %d messages processed again (their ack had not been confirmed)", killedAt, again)
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestBrokerRestart: the broker stops and comes back while messages flow;
// the same receivers and senders carry on without a module restart — on
// core NATS, on JetStream with the store kept, and on JetStream with the
// store lost (stream and consumer re-created by the wire).
func TestBrokerRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      Mode
		loseStore bool
	}{{"core", Core, false}, {"jetstream", JetStream, false}, {"jetstream store lost", JetStream, true}} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			dir := t.TempDir()
			b, err := embedded.Start(embedded.Options{Dir: filepath.Join(dir, "1"), Port: port, Logger: testLogger()})
			if err != nil {
				t.Fatal(err)
			}
			var broker atomic.Pointer[embedded.Server]
			broker.Store(b)
			t.Cleanup(func() { broker.Load().Shutdown() })
			opts := Options{Mode: tc.mode, HealthInterval: 200 * time.Millisecond, GracePeriod: time.Second}
			var handled atomic.Int64
			listen(t, newWire(t, connect(t, b.ClientURL()), opts), "restart", func(ctx context.Context, m *router.Message) ([]byte, error) {
				handled.Add(1)
				return m.Payload, nil
			})
			sender := newWire(t, connect(t, b.ClientURL()), opts)
			ctx, cancel := context.WithCancel(context.Background())
			var ok, failed atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ctx.Err() == nil; i++ {
					sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
					p := fmt.Sprint(i)
					out, err := sender.Send(sctx, &router.Message{To: "f.restart.n:in", Payload: []byte(p)})
					scancel()
					if err == nil && string(out) == p {
						ok.Add(1)
					} else {
						failed.Add(1)
						time.Sleep(20 * time.Millisecond)
					}
				}
			}()
			defer func() { cancel(); waitDone(t, done) }()
			waitUntilT(t, "traffic flows", func() bool { return ok.Load() >= 50 })
			b.Shutdown()
			time.Sleep(300 * time.Millisecond) // let both sides notice
			store := filepath.Join(dir, "1")
			if tc.loseStore {
				store = filepath.Join(dir, "2")
			}
			b2, err := embedded.Start(embedded.Options{Dir: store, Port: port, Logger: testLogger()})
			if err != nil {
				t.Fatal(err)
			}
			broker.Store(b2)
			before := ok.Load()
			waitUntilT(t, "traffic flows again after the restart", func() bool { return ok.Load() >= before+50 })
			t.Logf("ok %d, failed during the outage %d", ok.Load(), failed.Load())
		})
	}
}

// TestDurablePublishDedup: the SDK's durable-run hop — a re-emitted step
// (same x-step-key) is stored once; distinct steps are all delivered.
func TestDurablePublishDedup(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	opts := Options{Mode: JetStream}
	var mu sync.Mutex
	got := map[string]int{}
	listen(t, newWire(t, connect(t, b.ClientURL()), opts), "steps", func(ctx context.Context, m *router.Message) ([]byte, error) {
		mu.Lock()
		got[m.Metadata[HeaderStepKey]]++
		mu.Unlock()
		return nil, nil
	})
	w := newWire(t, connect(t, b.ClientURL()), opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, k := range []string{"s1", "s1", "s2", "s1", "s3"} {
		if err := w.Publish(ctx, &router.Message{To: "f.steps.n:in", Metadata: map[string]string{HeaderRunID: "run-1", HeaderStepKey: k}}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntilT(t, "three steps delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["s1"] == 1 && got["s2"] == 1 && got["s3"] == 1
	})
	time.Sleep(200 * time.Millisecond) // a duplicate would arrive by now
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got["s1"] != 1 {
		t.Fatalf("deliveries %v, want each step once", got)
	}
}

// TestDuplicateIsNotAwaited: a request the stream de-duplicates would never
// be answered; the sender fails at once instead of waiting for a reply.
func TestDuplicateIsNotAwaited(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	w := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// Nobody serves "idle"; the first message stays in the stream.
	if err := w.Publish(ctx, &router.Message{To: "f.idle.n:in", Metadata: map[string]string{HeaderStepKey: "step-1"}}); err != nil {
		t.Fatal(err)
	}
	nn, _ := router.ParseTo("f.idle.n:in")
	m, err := w.request(w.subject(nn), &router.Message{To: "f.idle.n:in"})
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set(HeaderMsgID, "step-1")
	_, err = w.sendJS(ctx, nn, m)
	if e := router.AsError(err); e == nil || e.Code != CodeDuplicate || e.Retryable || ctx.Err() != nil {
		t.Fatalf("err = %v, want an immediate %s", err, CodeDuplicate)
	}
}

// TestJetStreamReplicasAndSysmsg: on the durable wire two replicas share the
// module's consumer (each message once) and each has its own system
// consumer (every replica gets every system message).
func TestJetStreamReplicasAndSysmsg(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	var mu sync.Mutex
	counts := map[string]map[string]int{}
	for _, name := range []string{"r1", "r2"} {
		w := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream, Instance: name})
		listen(t, w, "pair", func(ctx context.Context, m *router.Message) ([]byte, error) {
			kind := "msg"
			if nn, _ := router.ParseTo(m.To); nn.Port == "_control" {
				kind = "sys"
			}
			mu.Lock()
			if counts[name] == nil {
				counts[name] = map[string]int{}
			}
			counts[name][kind]++
			mu.Unlock()
			return []byte(name), nil
		})
	}
	w := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := w.Send(ctx, &router.Message{To: "f.pair.n:in"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	out, err := w.Send(ctx, &router.Message{To: "f.pair.n:_control", Payload: []byte("{}")})
	if err != nil || (string(out) != "r1" && string(out) != "r2") {
		t.Fatalf("sysmsg: out=%q err=%v", out, err)
	}
	waitUntilT(t, "both replicas got the system message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts["r1"]["sys"] == 1 && counts["r2"]["sys"] == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if a, b := counts["r1"]["msg"], counts["r2"]["msg"]; a+b != 200 || a == 0 || b == 0 {
		t.Fatalf("load split %d/%d, want 200 shared by both", a, b)
	}
}
