package natswire

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// FuzzHeaders: what the sender writes, the receiver reads back (values
// with line breaks lose them, nothing else changes); an arbitrary depth
// header is a depth or a coded error.
func FuzzHeaders(f *testing.F) {
	f.Add("f.a.n:in", "f.b.m:out", "edge", "id-1", "k", "v", 3, "7")
	f.Add("x", "\r\n", "", "", "traceparent", "00-x", 0, "-1")
	f.Add("f.a.n.sub:_control", "", "e\nf", "", "x-mode", "rpc", 256, "99999999999999999999")
	f.Fuzz(func(t *testing.T, to, from, edge, id, key, val string, depth int, rawDepth string) {
		w := &Wire{opts: Options{Mode: Core}}
		msg := &router.Message{To: to, From: from, EdgeID: edge, ID: id, Depth: depth, Payload: []byte(val), Metadata: map[string]string{key: val}}
		m, err := w.request("s", msg)
		if err != nil {
			if validHeaderKey(key) {
				t.Fatalf("valid key %q refused: %v", key, err)
			}
			return
		}
		back, err := incoming(m.Header, m.Data)
		if depth < 0 {
			// Negative depths are never sent (the router refuses them);
			// they are simply not written.
			depth = 0
		}
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		clean := func(s string) string { return headerValue(s) }
		if back.To != clean(to) || back.From != clean(from) || back.EdgeID != clean(edge) || back.ID != clean(id) || back.Depth != depth || string(back.Payload) != val {
			t.Fatalf("round trip changed %+v into %+v", msg, back)
		}
		if got := back.Metadata[key]; got != clean(val) {
			t.Fatalf("metadata %q = %q, want %q", key, got, clean(val))
		}
		h := nats.Header{HeaderDepth: {rawDepth}}
		if got, err := incoming(h, nil); err != nil {
			if e := router.AsError(err); e.Code == "" || e.Retryable {
				t.Fatalf("depth %q: %v", rawDepth, err)
			}
		} else if got.Depth < 0 {
			t.Fatalf("depth %q read as %d", rawDepth, got.Depth)
		}
	})
}

// FuzzReply: any reply decodes to a result or a coded error, and a reply
// is an acknowledgement candidate (for the JetStream API check) only
// without headers and with a body that is a JSON object naming a stream
// (and domain) the broker could have.
func FuzzReply(f *testing.F) {
	f.Add([]byte(`{"stream":"module-edges","seq":1}`), "", "", "", "")
	f.Add([]byte("data"), "boom", "CODE", "true", "")
	f.Add([]byte{}, "", "", "", "1")
	f.Add([]byte(`{"stream":"a.b","seq":1}`), "", "", "", "")
	f.Add([]byte(`{"stream":"x","seq":1,"domain":"d*"}`), "", "", "", "")
	f.Add([]byte(`{"error":{"code":503},"seq":0}`), "", "", "", "")
	f.Fuzz(func(t *testing.T, data []byte, xerr, code, retry, empty string) {
		h := nats.Header{}
		for k, v := range map[string]string{HeaderError: xerr, HeaderErrorCode: code, HeaderErrorRetryable: retry, HeaderEmpty: empty} {
			if v != "" {
				h.Set(k, v)
			}
		}
		out, err := decodeReply(h, data)
		if err != nil {
			e := router.AsError(err)
			if e.Code == "" || (code == "" && e.Retryable) {
				t.Fatalf("error %#v from code %q retry %q", e, code, retry)
			}
		} else if len(out) > 0 && (empty == "1" || xerr != "") {
			t.Fatalf("result %q despite x-empty=%q x-error=%q", out, empty, xerr)
		}
		if a, ok := asPubAck(&nats.Msg{Data: data}); ok {
			if !json.Valid(data) || !validJSName(a.Stream, false) || (a.Domain != "" && !validJSName(a.Domain, true)) {
				t.Fatalf("%q taken for an acknowledgement of stream %q domain %q", data, a.Stream, a.Domain)
			}
		}
		if _, ok := asPubAck(&nats.Msg{Data: data, Header: h}); ok && len(h) > 0 {
			t.Fatalf("%q with headers %v taken for an acknowledgement", data, h)
		}
	})
}

func TestNewRejectsBadNames(t *testing.T) {
	nc := connect(t, sharedURL)
	for _, o := range []Options{{Prefix: "a.b"}, {Prefix: "a b"}, {Stream: "x*"}, {SysStream: "s>"}, {Prefix: "ü"}} {
		if _, err := New(nc, o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New accepted a nil connection")
	}
	w := newWire(t, nc, Options{Prefix: uniquePrefix()})
	if _, err := w.Listen("Not_Sanitised", router.Echo); err == nil {
		t.Error("Listen accepted an unsanitised module name")
	}
	if _, err := ParseMode("durable"); err == nil {
		t.Error("ParseMode accepted durable")
	}
	if m, err := ParseMode("JetStream"); err != nil || m != JetStream || m.String() != "jetstream-backed durable wire" {
		t.Errorf("ParseMode(JetStream) = %v, %v", m, err)
	}
}

// FuzzCredentialFiles: any content of a creds file or an nkey seed file is
// accepted or refused with a FieldError naming the option and the file —
// never a panic, and the error never quotes the content.
func FuzzCredentialFiles(f *testing.F) {
	f.Add([]byte("-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.sig\n------END NATS USER JWT------\n"))
	f.Add([]byte("SUAIO3FHUX5PNV2LQIIP7TZ3N4L7TX3W53MQGEIVYFIGA635OZCKEYHFLM\n"))
	f.Add([]byte("a.b.c"))
	f.Add([]byte("x.eyJzdWIiOiJVIiwibmF0cyI6eyJ0eXBlIjoidXNlciJ9fQ.y\nSU\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, opts := range []ConnectOptions{{CredsFile: p}, {NkeySeedFile: p}} {
			err := opts.Validate()
			if err == nil {
				continue
			}
			var fe *switchboard.FieldError
			if !errors.As(err, &fe) || fe.Value != p {
				t.Fatalf("%+v: %v, want a FieldError naming the file", opts, err)
			}
			if s := strings.TrimSpace(string(content)); len(s) >= 8 && strings.Contains(fe.Reason, s) {
				t.Fatalf("the error quotes the file: %v", err)
			}
		}
		jwtUser(string(content))
	})
}
