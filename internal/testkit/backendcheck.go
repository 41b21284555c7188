package testkit

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// CheckQuotedError fails the test unless err is a want (errors.Is), holds
// no raw control character (NUL, a line break, an escape sequence's ESC)
// and names each of names quoted (%q): no id, lease name or holder may
// break a log line or a terminal. what names the call.
func CheckQuotedError(t testing.TB, what string, err, want error, names ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if strings.IndexFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		t.Errorf("%s: error holds a raw control character: %q", what, err.Error())
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), strconv.Quote(n)) {
			t.Errorf("%s: error %q does not name %s quoted", what, err.Error(), strconv.Quote(n))
		}
	}
}

// CheckForeignMetadata is the reading half of a backend's test of metadata
// another tool wrote: c (logging to logs) holds the rows good (metadata
// {"zone": "a"}), odd (rewritten to {"zone": "a", "port": 8080, "tls":
// true, "o": {"x": [1, 2]}, "gone": null}) and notObject (rewritten to a
// JSON array), and ws watches c. List (twice), Get, the watcher and a
// snapshot of the handle openOther opens must all read them as
// storedmeta.Read says, and c must log it once, as a warning.
func CheckForeignMetadata(t testing.TB, ctx context.Context, c switchboard.Catalog, openOther func() switchboard.Catalog,
	ws *WatchSet, logs *SyncBuffer, good, odd, notObject string) {
	t.Helper()
	wantOdd := map[string]string{"zone": "a", "port": "8080", "tls": "true", "o": `{"x":[1,2]}`}
	check := func(how string, got []switchboard.Instance) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("%s: %d instances, want 3: %+v", how, len(got), got)
		}
		for _, in := range got {
			want := map[string]string{"zone": "a"}
			switch in.ID {
			case odd:
				want = wantOdd
			case notObject:
				want = map[string]string{}
			}
			if !maps.Equal(in.Metadata, want) {
				t.Errorf("%s: %s has metadata %#v, want %#v", how, in.ID, in.Metadata, want)
			}
		}
	}
	for range 2 {
		got, err := c.List(ctx, switchboard.Query{All: true})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		check("List", got)
	}
	var gets []switchboard.Instance
	for _, id := range []string{good, odd, notObject} {
		in, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		gets = append(gets, in)
	}
	check("Get", gets)
	WaitUntil(t, "the watcher to read the rewritten rows", func() bool {
		in, ok := ws.Get(odd)
		return ok && maps.Equal(in.Metadata, wantOdd)
	})
	if in, _ := ws.Get(notObject); len(in.Metadata) != 0 {
		t.Errorf("watcher: %s has metadata %#v, want none", notObject, in.Metadata)
	}

	// A snapshot of another handle reads them the same.
	snap, err := openOther().Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	var initial []switchboard.Instance
	for ev := range snap {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		initial = append(initial, ev.Instance)
	}
	check("snapshot", initial)

	if n := strings.Count(logs.String(), "written by another tool"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("not a warning:\n%s", logs.String())
	}
}
