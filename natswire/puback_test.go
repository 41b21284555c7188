package natswire

import (
	"context"
	"errors"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard/router"
)

// ackShaped is a module result that has exactly the shape of a JetStream
// publish acknowledgement.
const ackShaped = `{"stream":"x","seq":1}`

// ackShapedResponder answers every core request on subject like an SDK
// module whose result is ackShaped: that body, no headers.
func ackShapedResponder(t *testing.T, nc *nats.Conn, subject, queue string) {
	t.Helper()
	sub, err := nc.QueueSubscribe(subject, queue, func(m *nats.Msg) { _ = m.Respond([]byte(ackShaped)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestAckShapedResultIsAResult: on the core wire, a module whose result is
// shaped like a publish acknowledgement gets that result back — whether no
// stream of that name exists or the stream exists but does not capture the
// subject — while a real stream on the subject still gives CodeWrongMode.
func TestAckShapedResultIsAResult(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	prefix := uniquePrefix()
	ackShapedResponder(t, connect(t, b.ClientURL()), prefix+".shaped.msg", "shaped")
	core := newWire(t, connect(t, b.ClientURL()), Options{Prefix: prefix})
	send := func(what string) {
		t.Helper()
		out, err := core.Send(ctx, &router.Message{To: "f.shaped.n:in", EdgeID: "e", Payload: []byte("x")})
		if err != nil || string(out) != ackShaped {
			t.Fatalf("%s: out=%q err=%v, want the module's result %s", what, out, err, ackShaped)
		}
	}
	send("no stream x")

	js, err := jetstream.New(connect(t, b.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "x", Subjects: []string{"elsewhere.>", prefix + ".other.*"}}); err != nil {
		t.Fatal(err)
	}
	send("stream x on other subjects")

	// The JetStream fleet: its stream captures the subject, and a core
	// request there is answered by the stream's acknowledgement.
	jsPrefix := uniquePrefix()
	jsw := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream, Prefix: jsPrefix, Stream: jsPrefix + "-edges", SysStream: jsPrefix + "-sys"})
	if err := jsw.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	coreOnJS := newWire(t, connect(t, b.ClientURL()), Options{Prefix: jsPrefix})
	out, err := coreOnJS.Send(ctx, &router.Message{To: "f.some-mod.n:in", EdgeID: "e", Payload: []byte("x")})
	if e := router.AsError(err); e == nil || e.Code != CodeWrongMode || e.Retryable {
		t.Fatalf("out=%q err=%v, want %s", out, err, CodeWrongMode)
	}
}

// startPlainBroker starts a broker without JetStream (opts may add users),
// as a broker of a fleet that never used the JetStream wire.
func startPlainBroker(t *testing.T, opts natsserver.Options) string {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := natsserver.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(waitFor) {
		t.Fatal("broker not ready")
	}
	return s.ClientURL()
}

// TestAckShapedResultWithoutJetStream: on a broker without JetStream
// nothing can have acknowledged a publish, so the reply is the module's.
func TestAckShapedResultWithoutJetStream(t *testing.T) {
	url := startPlainBroker(t, natsserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	prefix := uniquePrefix()
	ackShapedResponder(t, connect(t, url), prefix+".shaped.msg", "shaped")
	out, err := newWire(t, connect(t, url), Options{Prefix: prefix}).Send(ctx, &router.Message{To: "f.shaped.n:in", Payload: []byte("x")})
	if err != nil || string(out) != ackShaped {
		t.Fatalf("out=%q err=%v, want the module's result", out, err)
	}
}

// TestAckShapedResultUndecided: when the sender may not ask the JetStream
// API, an acknowledgement-shaped reply is neither passed off as the
// module's result nor called a wrong mode: the send fails, retryable,
// saying why.
func TestAckShapedResultUndecided(t *testing.T) {
	url := startPlainBroker(t, natsserver.Options{Users: []*natsserver.User{
		{Username: "module", Password: "m"},
		{Username: "sender", Password: "s", Permissions: &natsserver.Permissions{Publish: &natsserver.SubjectPermission{Deny: []string{"$JS.API.>"}}}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	prefix := uniquePrefix()
	ackShapedResponder(t, connect(t, "nats://module:m@"+url[len("nats://"):]), prefix+".shaped.msg", "shaped")
	out, err := newWire(t, connect(t, "nats://sender:s@"+url[len("nats://"):]), Options{Prefix: prefix}).Send(ctx, &router.Message{To: "f.shaped.n:in", Payload: []byte("x")})
	e := router.AsError(err)
	if e == nil || e.Code != router.CodeUnavailable || !e.Retryable || out != nil {
		t.Fatalf("out=%q err=%v, want a retryable %s error", out, err, router.CodeUnavailable)
	}
	if !strings.Contains(e.Message, "publish acknowledgement") || !strings.Contains(e.Message, prefix+".shaped.msg") {
		t.Fatalf("the error does not say why: %v", err)
	}
	t.Log(err)
}

// TestAckVerdict: the decision on the JetStream API's answer.
func TestAckVerdict(t *testing.T) {
	info := func(subjects ...string) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Config: jetstream.StreamConfig{Subjects: subjects}}
	}
	const subj = "tinymodule.mod.msg"
	for _, c := range []struct {
		name string
		info *jetstream.StreamInfo
		err  error
		want verdict
	}{
		{"stream captures with *", info("tinymodule.*.msg"), nil, isAnAck},
		{"stream captures with >", info("other", "tinymodule.>"), nil, isAnAck},
		{"stream captures literally", info(subj), nil, isAnAck},
		{"stream on other subjects", info("tinymodule.*.sysmsg", "tinymodule.mod"), nil, notAnAck},
		{"stream without subjects (a mirror)", info(), nil, notAnAck},
		{"no such stream", nil, jetstream.ErrStreamNotFound, notAnAck},
		{"no JetStream", nil, nats.ErrNoResponders, notAnAck},
		{"no JetStream for the account", nil, &jetstream.APIError{ErrorCode: jetstream.JSErrCodeJetStreamNotEnabledForAccount}, notAnAck},
		{"timeout", nil, context.DeadlineExceeded, cannotTell},
		{"other API error", nil, &jetstream.APIError{ErrorCode: 10001, Description: "boom"}, cannotTell},
		{"other failure", nil, errors.New("permissions violation"), cannotTell},
		{"no info", nil, nil, cannotTell},
	} {
		if got := ackVerdict(subj, c.info, c.err); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

// FuzzSubjectCaptured: the stream-subject match agrees with the broker's
// own for every valid literal subject and valid filter. Filters with a
// token that merely starts with a wildcard character ("*0") are left out:
// the broker's sublist, which decides what a stream captures, takes such a
// token literally, while SubjectMatchesFilter takes it for a wildcard.
func FuzzSubjectCaptured(f *testing.F) {
	for _, c := range [][2]string{{"tinymodule.*.msg", "tinymodule.a.msg"}, {">", "a"}, {"a.>", "a"}, {"a.>", "a.b.c"},
		{"*", "a.b"}, {"a.*.c", "a.b.c.d"}, {"a.b", "a.b"}, {"a.*", "a.b"}, {"*.>", "a"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, filter, subject string) {
		got := subjectCaptured(filter, subject)
		if !natsserver.IsValidSubject(filter) || !natsserver.IsValidLiteralSubject(subject) || !natsserver.IsValidSubject(subject) {
			return
		}
		for tok := range strings.SplitSeq(filter, ".") {
			if len(tok) > 1 && (tok[0] == '*' || tok[0] == '>') {
				return
			}
		}
		if want := natsserver.SubjectMatchesFilter(subject, filter); got != want {
			t.Fatalf("subjectCaptured(%q, %q) = %v, the broker says %v", filter, subject, got, want)
		}
		v := ackVerdict(subject, &jetstream.StreamInfo{Config: jetstream.StreamConfig{Subjects: []string{filter}}}, nil)
		if (v == isAnAck) != got || v == cannotTell {
			t.Fatalf("ackVerdict for a stream on %q, subject %q: %d", filter, subject, v)
		}
	})
}
