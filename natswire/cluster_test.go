package natswire

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard/router"
)

// testCluster is a 3-node NATS cluster, each node on fixed loopback ports
// (so a node restarts where it was) and, with JetStream, its own store
// directory. The nodes run in this process (the embedded nats-server), or,
// bin set, as processes of that nats-server binary.
type testCluster struct {
	t          *testing.T
	jetstream  bool
	bin        string
	names      []string
	clientPort []int
	routePort  []int
	dirs       []string
	nodes      []*server.Server // in process
	procs      []*exec.Cmd      // bin set
}

func startCluster(t *testing.T, jetstream bool) *testCluster {
	t.Helper()
	return startClusterOf(t, jetstream, "")
}

func startClusterOf(t *testing.T, jetstream bool, bin string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, jetstream: jetstream, bin: bin, procs: make([]*exec.Cmd, 3)}
	base := t.TempDir()
	for i := range 3 {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
		c.clientPort = append(c.clientPort, freePort(t))
		c.routePort = append(c.routePort, freePort(t))
		c.dirs = append(c.dirs, filepath.Join(base, c.names[i]))
	}
	c.nodes = make([]*server.Server, 3)
	for i := range 3 {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range 3 {
			if c.nodes[i] != nil || c.procs[i] != nil {
				c.kill(i)
			}
		}
	})
	return c
}

// start starts node i (again, after kill: same ports, same store).
func (c *testCluster) start(i int) {
	c.t.Helper()
	var routes []string
	for _, p := range c.routePort {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	if c.bin != "" {
		c.startProcess(i, strings.Join(routes, ","))
		return
	}
	opts := &server.Options{
		ServerName: c.names[i],
		Host:       "127.0.0.1",
		Port:       c.clientPort[i],
		Cluster:    server.ClusterOpts{Name: "sbtest", Host: "127.0.0.1", Port: c.routePort[i]},
		Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		NoLog:      true,
		NoSigs:     true,
	}
	if c.jetstream {
		opts.JetStream, opts.StoreDir = true, c.dirs[i]
		opts.JetStreamMaxMemory, opts.JetStreamMaxStore = 64<<20, 1<<30
	}
	s, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("node %s not ready", c.names[i])
	}
	c.nodes[i] = s
}

// startProcess starts node i as a nats-server process and waits until
// it accepts connections.
func (c *testCluster) startProcess(i int, routes string) {
	c.t.Helper()
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(c.clientPort[i]), "-n", c.names[i],
		"--cluster", "nats://127.0.0.1:" + strconv.Itoa(c.routePort[i]), "--cluster_name", "sbtest", "--routes", routes}
	if c.jetstream {
		args = append(args, "-js", "-sd", c.dirs[i])
	}
	cmd := exec.Command(c.bin, args...)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = cmd
	waitUntilT(c.t, "node "+c.names[i]+" accepts connections", func() bool {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.clientPort[i]), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// kill stops node i at once: a process gets SIGKILL; in process, Shutdown
// stands in for it (the node's client and route connections close
// without a goodbye, and its store is left as it is at that moment).
func (c *testCluster) kill(i int) {
	if p := c.procs[i]; p != nil {
		_ = p.Process.Kill()
		_ = p.Wait()
		c.procs[i] = nil
		return
	}
	c.nodes[i].Shutdown()
	c.nodes[i].WaitForShutdown()
	c.nodes[i] = nil
}

// url is the comma-separated client URL of every node.
func (c *testCluster) url() string {
	var u []string
	for _, p := range c.clientPort {
		u = append(u, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	return strings.Join(u, ",")
}

func (c *testCluster) nodeURL(i int) string {
	return "nats://127.0.0.1:" + strconv.Itoa(c.clientPort[i])
}

func (c *testCluster) index(name string) int {
	for i, n := range c.names {
		if n == name {
			return i
		}
	}
	c.t.Fatalf("no node %q", name)
	return -1
}

// countingHandler counts the log records with a given message (and
// forwards nothing).
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestClusterNodeKilled: a 3-node JetStream cluster, the wire's streams
// with 3 replicas, its nodes in this process and, when the machine has a
// nats-server binary, as processes killed with SIGKILL (that half is
// skipped, and says so, without one). 2,000 durable messages are published (8 publishers,
// each message with its own step key) and requests sent, while the node
// leading the edge stream is killed and later restarted on its store.
// Every message is handled by the receiving module, every request is
// answered, and the stream and the consumer end empty: nothing lost,
// nothing left unacknowledged (a nats-server older than 2.9.16 may keep
// acknowledged messages in the stream; they must have been handled and be
// at or below the consumer's ack floor). Sends that failed during the failover
// are published again with the same step key; the stream's duplicate
// window drops those it already held. Messages handled twice (a
// redelivery whose first acknowledgement was lost with the node) are
// counted and reported, not failed.
func TestClusterNodeKilled(t *testing.T) {
	t.Run("in process", func(t *testing.T) { clusterNodeKilled(t, startCluster(t, true)) })
	t.Run("nats-server processes", func(t *testing.T) {
		bin, err := exec.LookPath("nats-server")
		if err != nil {
			t.Skip("no nats-server binary on PATH: the cluster ran in process only")
		}
		clusterNodeKilled(t, startClusterOf(t, true, bin))
	})
}

func clusterNodeKilled(t *testing.T, c *testCluster) {
	const total = 2000
	opts := Options{Mode: JetStream, Replicas: 3, AckWait: 2 * time.Second, InProgressInterval: 500 * time.Millisecond,
		HealthInterval: 500 * time.Millisecond, GracePeriod: time.Second}

	var mu sync.Mutex
	handled := map[string]int{} // message id → times handled
	var handledDurable atomic.Int64
	recvNC := connect(t, c.url())
	recvWire := newWire(t, recvNC, opts)

	var deduped atomic.Int64
	sendOpts := opts
	sendOpts.Logger = slog.New(countingHandler{msg: "jetstream transport: durable publish deduped", n: &deduped})
	sender := newWire(t, connect(t, c.url()), sendOpts)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The cluster elects its JetStream leader after start: the streams
	// are created once it has.
	waitUntilT(t, "the cluster creates the R3 streams", func() bool {
		ectx, ecancel := context.WithTimeout(ctx, 2*time.Second)
		defer ecancel()
		return sender.EnsureStreams(ectx) == nil
	})
	listen(t, recvWire, "durable", func(ctx context.Context, m *router.Message) ([]byte, error) {
		mu.Lock()
		handled[m.ID]++
		first := handled[m.ID] == 1
		mu.Unlock()
		if first && strings.HasPrefix(m.ID, "d") {
			handledDurable.Add(1)
		}
		return m.Payload, nil
	})

	// Publishers take ids in order; they may not pass 1,000 before the
	// kill nor 1,500 before the restart, so messages flow on both sides
	// of each.
	var next atomic.Int64
	killed, restarted := make(chan struct{}), make(chan struct{})
	var republished atomic.Int64
	var pubWG sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				switch i {
				case 1000:
					<-killed
				case 1500:
					<-restarted
				}
				id := "d" + strconv.FormatInt(i, 10)
				msg := &router.Message{ID: id, To: "f.durable.n:in", Payload: []byte(id), Metadata: map[string]string{HeaderStepKey: id}}
				for attempt := 0; ; attempt++ {
					if ctx.Err() != nil {
						errs <- fmt.Errorf("publish %s: gave up: %w", id, ctx.Err())
						return
					}
					if attempt > 0 {
						republished.Add(1)
					}
					pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
					err := sender.Publish(pctx, msg)
					pcancel()
					if err == nil {
						break
					}
					if e := router.AsError(err); e == nil || !e.Retryable {
						errs <- fmt.Errorf("publish %s: %w (not retryable)", id, err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	// One requester: each request retried until it is answered.
	stopReq := make(chan struct{})
	var answered, reqRetries atomic.Int64
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		for i := 0; ; i++ {
			select {
			case <-stopReq:
				return
			default:
			}
			id := "r" + strconv.Itoa(i)
			for attempt := 0; ; attempt++ {
				if ctx.Err() != nil {
					errs <- fmt.Errorf("request %s: gave up: %w", id, ctx.Err())
					return
				}
				if attempt > 0 {
					reqRetries.Add(1)
				}
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				out, err := sender.Send(rctx, &router.Message{ID: id, To: "f.durable.n:in", Payload: []byte(id)})
				rcancel()
				if err == nil {
					if string(out) != id {
						errs <- fmt.Errorf("request %s: answered %q", id, out)
						return
					}
					answered.Add(1)
					break
				}
				if e := router.AsError(err); e == nil || !e.Retryable {
					errs <- fmt.Errorf("request %s: %w (not retryable)", id, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	failIf := func() {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}

	js, err := jetstream.New(connect(t, c.url()))
	if err != nil {
		t.Fatal(err)
	}
	streamInfo := func() *jetstream.StreamInfo {
		ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
		defer icancel()
		s, err := js.Stream(ictx, DefaultStream)
		if err != nil {
			return nil
		}
		info, err := s.Info(ictx)
		if err != nil {
			return nil
		}
		return info
	}
	waitUntilT(t, "500 messages handled", func() bool { failIf(); return handledDurable.Load() >= 500 })
	var leader string
	waitUntilT(t, "the edge stream has a leader", func() bool {
		if info := streamInfo(); info != nil && info.Cluster != nil && info.Cluster.Leader != "" {
			leader = info.Cluster.Leader
			return true
		}
		return false
	})
	victim := c.index(leader)
	recvNode := recvNC.ConnectedServerName()
	c.kill(victim)
	killedAt := handledDurable.Load()
	close(killed)
	waitUntilT(t, "messages flow on two nodes", func() bool { failIf(); return handledDurable.Load() >= killedAt+300 })
	c.start(victim)
	restartedAt := handledDurable.Load()
	close(restarted)

	waitDuring(t, ctx, "every message published", func() bool {
		failIf()
		return next.Load() >= total+8 // each publisher took one past the end
	}, pubWG.Wait)
	close(stopReq)
	waitDone(t, reqDone)
	failIf()
	version := recvNC.ConnectedServerVersion()
	end := endCheck{js: js, stream: DefaultStream, consumer: "durable", keepsAcked: serverBefore(version, 2, 9, 16),
		handled: func(id string) int { mu.Lock(); defer mu.Unlock(); return handled[id] }}
	var info *jetstream.StreamInfo
	var kept []heldMsg
	var floor uint64
	waitSeen := "nothing yet"
	defer func() {
		if t.Failed() {
			t.Logf("last seen while waiting for every acknowledgement (nats-server %s): %s", version, waitSeen)
			held, err := heldMessages(ctx, js, DefaultStream)
			t.Logf("messages left in the stream: %s (%v)", end.describe(held), err)
		}
	}()
	waitDuring(t, ctx, "every message handled and acknowledged", func() bool {
		waitSeen = fmt.Sprintf("handled %d of %d", handledDurable.Load(), total)
		if handledDurable.Load() < total {
			return false
		}
		var ok bool
		var seen string
		ok, seen, info, kept, floor = end.done(ctx)
		waitSeen += seen
		return ok
	}, nil)
	if len(kept) > 0 {
		t.Logf("nats-server %s kept %d acknowledged messages in the stream (handled, at or below the consumer's ack floor %d): %s",
			version, len(kept), floor, end.describe(kept))
	}
	if info.Config.Replicas != 3 {
		t.Fatalf("edge stream has %d replicas, want 3", info.Config.Replicas)
	}
	waitDuring(t, ctx, "the restarted node is a current replica again", func() bool {
		info := streamInfo()
		if info == nil || info.Cluster == nil {
			return false
		}
		if info.Cluster.Leader == leader {
			return true
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == leader && r.Current {
				return true
			}
		}
		return false
	}, nil)

	// Sends published again within the duplicate window are dropped by
	// the stream, on the cluster that lost and regained a node: ten
	// step keys already handled are published once more, then a new one.
	before := deduped.Load()
	var seen [10]int
	mu.Lock()
	for i := range seen {
		seen[i] = handled["d"+strconv.Itoa(i)]
	}
	mu.Unlock()
	for i := range 10 {
		id := "d" + strconv.Itoa(i)
		if err := sender.Publish(ctx, &router.Message{ID: id, To: "f.durable.n:in", Payload: []byte(id), Metadata: map[string]string{HeaderStepKey: id}}); err != nil {
			t.Fatalf("publish %s again: %v", id, err)
		}
	}
	if n := deduped.Load() - before; n != 10 {
		t.Fatalf("%d of 10 sends published again were dropped by the duplicate window", n)
	}
	if err := sender.Publish(ctx, &router.Message{ID: "sentinel", To: "f.durable.n:in", Metadata: map[string]string{HeaderStepKey: "sentinel"}}); err != nil {
		t.Fatal(err)
	}
	waitDuring(t, ctx, "the message after the duplicates handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled["sentinel"] == 1
	}, nil)

	mu.Lock()
	defer mu.Unlock()
	for i, n := range seen {
		if m := handled["d"+strconv.Itoa(i)]; m != n {
			t.Fatalf("d%d handled again (%d times, %d before) although the stream dropped it as a duplicate", i, m, n)
		}
	}
	twice, most := 0, 0
	for i := range total {
		n := handled["d"+strconv.Itoa(i)]
		if n == 0 {
			t.Fatalf("message d%d never handled", i)
		}
		if n > 1 {
			twice++
		}
		most = max(most, n)
	}
	reqTwice := 0
	for id, n := range handled {
		if strings.HasPrefix(id, "r") && n > 1 {
			reqTwice++
		}
	}
	t.Logf("killed %s (the edge stream's leader; the receiver was on %s) after %d messages handled, restarted it after %d",
		leader, recvNode, killedAt, restartedAt)
	t.Logf("%d durable messages handled; %d handled more than once (redelivered; at most %d times); %d sends published again during the failover, %d of them dropped by the duplicate window",
		total, twice, most, republished.Load(), before)
	t.Logf("%d requests answered (%d retries; %d requests handled more than once)", answered.Load(), reqRetries.Load(), reqTwice)
}

// clusterLeader names the leader in ci ("none" when there is none).
func clusterLeader(ci *jetstream.ClusterInfo) string {
	if ci == nil || ci.Leader == "" {
		return "none"
	}
	return ci.Leader
}

// endCheck tells whether a work-queue stream and its consumer reached the
// end of a test: the consumer (as its leader reports it) with nothing
// pending and nothing awaiting an ack, and the stream empty. A redelivered
// count is not part of it: it only says how many messages awaiting an ack
// were delivered again.
//
// A work-queue stream drops a message on each replica when the consumer's
// acknowledgement reaches that replica. nats-server before 2.9.16 loses
// the drop on a replica that gets the acknowledgement before the message
// itself: it forwards a delete to the stream's leader, and when that
// leader is a node just killed, the delete is gone with it. The message
// then stays in that replica, acknowledged, at or below the consumer's ack
// floor, never delivered again, until the stream's max age. With
// keepsAcked (such a server) the check accepts up to 10 of those when
// handled, and returns them; otherwise the stream must end empty.
type endCheck struct {
	js               jetstream.JetStream
	stream, consumer string
	keepsAcked       bool
	handled          func(id string) int // times the message with that Nats-Msg-Id was handled
}

// done reports whether the end is reached, what it saw, the stream's
// info, the acknowledged messages the stream kept and the consumer's ack
// floor (a stream sequence).
func (e endCheck) done(ctx context.Context) (ok bool, seen string, info *jetstream.StreamInfo, kept []heldMsg, floor uint64) {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cons, err := e.js.Consumer(ictx, e.stream, e.consumer)
	var ci *jetstream.ConsumerInfo
	if err == nil {
		ci, err = cons.Info(ictx)
	}
	if err != nil {
		return false, "; consumer info: " + err.Error(), nil, nil, 0
	}
	seen = fmt.Sprintf("; consumer (leader %s): %d ack pending, %d pending, %d redelivered, delivered %d/%d, ack floor %d/%d",
		clusterLeader(ci.Cluster), ci.NumAckPending, ci.NumPending, ci.NumRedelivered,
		ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream)
	floor = ci.AckFloor.Stream
	if ci.NumAckPending != 0 || ci.NumPending != 0 {
		return false, seen, nil, nil, floor
	}
	s, err := e.js.Stream(ictx, e.stream)
	if err == nil {
		info, err = s.Info(ictx)
	}
	if err != nil {
		return false, seen + "; stream info: " + err.Error(), nil, nil, floor
	}
	seen += fmt.Sprintf("; stream (leader %s) holds %d", clusterLeader(info.Cluster), info.State.Msgs)
	if info.State.Msgs == 0 {
		return true, seen, info, nil, floor
	}
	if !e.keepsAcked || info.State.Msgs > 10 {
		return false, seen, info, nil, floor
	}
	held, err := heldMessages(ctx, e.js, e.stream)
	if err != nil || uint64(len(held)) != info.State.Msgs {
		return false, seen, info, nil, floor
	}
	for _, m := range held {
		if m.seq > floor || e.handled(m.id) == 0 {
			return false, seen, info, nil, floor
		}
	}
	return true, seen, info, held, floor
}

// describe names each message with how often it was handled.
func (e endCheck) describe(held []heldMsg) string {
	var out []string
	for _, m := range held {
		out = append(out, fmt.Sprintf("seq %d %s handled %d×", m.seq, m.id, e.handled(m.id)))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// heldMsg is a message a stream holds: its sequence and Nats-Msg-Id.
type heldMsg struct {
	seq uint64
	id  string
}

// heldMessages lists (at most 20 of) the messages a stream holds.
func heldMessages(ctx context.Context, js jetstream.JetStream, stream string) ([]heldMsg, error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ictx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return nil, err
	}
	deleted := make(map[uint64]bool, len(info.State.Deleted))
	for _, seq := range info.State.Deleted {
		deleted[seq] = true
	}
	var held []heldMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq && len(held) < 20; seq++ {
		if deleted[seq] {
			continue
		}
		m, err := s.GetMsg(ictx, seq)
		if err != nil {
			return held, err
		}
		held = append(held, heldMsg{seq: seq, id: m.Header.Get(HeaderMsgID)})
	}
	return held, nil
}

// serverBefore reports whether a nats-server version ("2.9.10",
// "2.10.0-beta.1") is older than major.minor.patch; a version it cannot
// read is not.
func serverBefore(version string, major, minor, patch int) bool {
	core, _, _ := strings.Cut(version, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		v[i] = n
	}
	want := [3]int{major, minor, patch}
	for i := range v {
		if v[i] != want[i] {
			return v[i] < want[i]
		}
	}
	return false
}

// TestEndCheck: the cluster test's end check is reached only when the
// consumer has nothing pending and nothing awaiting an ack, and the stream
// is empty, or (told the server keeps acknowledged messages) holds only
// handled messages at or below the consumer's ack floor. A stream with
// limits retention keeps messages after their ack, as such a server does
// with a work-queue stream.
func TestEndCheck(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	js, err := jetstream.New(connect(t, b.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	stream := uniquePrefix()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".msg"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m1", "m2"} {
		if _, err := js.Publish(ctx, stream+".msg", nil, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	handled := map[string]int{"m1": 1, "m2": 1}
	end := endCheck{js: js, stream: stream, consumer: "c", keepsAcked: true, handled: func(id string) int { return handled[id] }}
	if ok, seen, _, _, _ := end.done(ctx); ok {
		t.Fatalf("done with two messages not yet delivered%s", seen)
	}
	for range 2 {
		batch, err := cons.Fetch(1)
		if err != nil {
			t.Fatal(err)
		}
		m := <-batch.Messages()
		if m == nil {
			t.Fatalf("fetch: %v", batch.Error())
		}
		if ok, seen, _, _, _ := end.done(ctx); ok {
			t.Fatalf("done with a message awaiting its ack%s", seen)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ok, seen, _, kept, floor := end.done(ctx)
	if !ok || len(kept) != 2 || kept[0] != (heldMsg{1, "m1"}) || kept[1] != (heldMsg{2, "m2"}) || floor != 2 {
		t.Fatalf("done %v, kept %v, floor %d%s; want done, m1 and m2 kept at or below floor 2", ok, kept, floor, seen)
	}
	handled["m2"] = 0
	if ok, seen, _, _, _ := end.done(ctx); ok {
		t.Fatalf("done although the stream holds m2, never handled%s", seen)
	}
	handled["m2"] = 1
	end.keepsAcked = false
	if ok, seen, _, _, _ := end.done(ctx); ok {
		t.Fatalf("done although the stream holds two messages and the server removes acknowledged ones%s", seen)
	}
	for _, seq := range []uint64{1, 2} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if ok, seen, _, kept, _ := end.done(ctx); !ok || kept != nil {
		t.Fatalf("not done (kept %v) with the stream empty%s", kept, seen)
	}
}

func TestServerBefore(t *testing.T) {
	for _, c := range []struct {
		version string
		want    bool
	}{
		{"2.9.10", true}, {"2.9.15", true}, {"2.8.99", true}, {"1.99.99", true},
		{"2.9.16", false}, {"2.9.17", false}, {"2.10.0-beta.1", false}, {"2.15.2", false}, {"3.0.0", false},
		{"", false}, {"2.9", false}, {"x.y.z", false},
	} {
		if got := serverBefore(c.version, 2, 9, 16); got != c.want {
			t.Errorf("serverBefore(%q, 2.9.16) = %v, want %v", c.version, got, c.want)
		}
	}
}

// waitDuring waits until cond holds, polling, for as long as ctx lasts;
// then, when wait is set, for wait to return.
func waitDuring(t *testing.T, ctx context.Context, what string, cond func() bool, wait func()) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if wait != nil {
		wait()
	}
}

// TestClusterCoreNodeKilled: core request/reply across a 3-node cluster,
// the module connected to one node and the sender to another. The
// module's node is killed: requests in flight then fail with a retryable
// error, the module reconnects to another node, and later requests
// succeed.
func TestClusterCoreNodeKilled(t *testing.T) {
	c := startCluster(t, false)
	recv := connect(t, c.nodeURL(0))
	listen(t, newWire(t, recv, Options{}), "core", router.Echo)
	sender := newWire(t, connect(t, c.nodeURL(1)), Options{})
	waitUntilT(t, "the module's interest reaches the sender's node", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := sender.Send(ctx, &router.Message{To: "f.core.n:in", Payload: []byte("x")})
		return err == nil
	})

	var ok atomic.Int64
	var failures sync.Map // error code → count
	var permanent atomic.Pointer[error]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			p := strconv.Itoa(i)
			out, err := sender.Send(rctx, &router.Message{To: "f.core.n:in", Payload: []byte(p)})
			rcancel()
			switch {
			case err == nil && string(out) == p:
				ok.Add(1)
			case err == nil:
				e := fmt.Errorf("request %s answered %q", p, out)
				permanent.Store(&e)
			case ctx.Err() != nil:
			default:
				e := router.AsError(err)
				if !e.Retryable {
					permanent.Store(&err)
				}
				n, _ := failures.LoadOrStore(e.Code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	defer func() { cancel(); waitDone(t, done) }()
	waitUntilT(t, "requests flow", func() bool { return ok.Load() >= 50 })
	c.kill(0)
	before := ok.Load()
	waitUntilT(t, "requests succeed again after the module reconnected", func() bool { return ok.Load() >= before+50 })
	if p := permanent.Load(); p != nil {
		t.Fatalf("a request failed for good: %v", *p)
	}
	if recv.ConnectedServerName() == c.names[0] {
		t.Fatal("the module is still on the killed node")
	}
	var seen []string
	failures.Range(func(k, v any) bool {
		seen = append(seen, fmt.Sprintf("%s ×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("the module moved to %s; retryable failures during the move: %v", recv.ConnectedServerName(), seen)
}
