package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// rss returns a process's resident memory (VmRSS) in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A slow reader, as a user meets it: `switchboard watch --json | less`
// with the pager paused. The watch process's stdout is a pipe nobody
// reads; 20,000 changes of 4 KiB instances later its memory has not grown
// with them, and once the pipe is read again the output ends with exactly
// the catalog's state.
func TestPausedWatchPipeDoesNotGrow(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "catalog.db")
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ctx := context.Background()
	comp := json.RawMessage(`{"blob":"` + strings.Repeat("x", 4096) + `"}`)
	const n = 100
	ids := make([]string, n)
	put := func(i, version int) {
		in := switchboard.Instance{ID: ids[i], Name: fmt.Sprintf("svc-%03d", i), Type: "writer", Address: "127.0.0.1:9000",
			Metadata: map[string]string{"v": strconv.Itoa(version)}, Components: comp, TTL: time.Hour}
		out, err := cat.Register(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = out.ID
	}
	for i := range n {
		put(i, 0)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli(t), "watch", "--json", "--dsn", dsn)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); r.Close() })
	lines := bufio.NewReaderSize(r, 1<<20)
	readLine := func() map[string]any {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			l, _ := lines.ReadString('\n')
			got <- l
		}()
		select {
		case l := <-got:
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("watch printed %q: %v", l, err)
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("watch printed nothing within 30 s")
			return nil
		}
	}
	readLine() // the watch is running; from here on nobody reads the pipe

	const changes = 20_000
	var base int64
	for c := 1; c <= changes; c++ {
		put(c%n, c)
		if c == 2_000 {
			base = rss(t, cmd.Process.Pid) // the pipe and the queue are full by now
		}
	}
	time.Sleep(2 * time.Second) // let the watch process read what was written
	grown := rss(t, cmd.Process.Pid) - base
	t.Logf("watch process RSS: %d MiB after 2,000 changes, %+d MiB after %d more (about %d MiB of instances written)",
		base>>20, grown>>20, changes-2_000, (changes-2_000)*len(comp)>>20)
	if grown > 48<<20 {
		t.Fatalf("the paused watch grew by %d MiB while %d MiB of changes went by", grown>>20, (changes-2_000)*len(comp)>>20)
	}

	// The pager resumes: the output must end with the catalog's state.
	want := map[string]string{}
	for i := range n {
		want[ids[i]] = strconv.Itoa(changes - (changes-i)%n)
		if i == 0 {
			want[ids[i]] = strconv.Itoa(changes)
		}
	}
	got := map[string]string{}
	done := func() bool {
		if len(got) != len(want) {
			return false
		}
		for id, v := range want {
			if got[id] != v {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !done(); {
		if time.Now().After(deadline) {
			t.Fatalf("after reading, the watch shows %d instances, not the catalog's state", len(got))
		}
		ev := readLine()
		in, _ := ev["instance"].(map[string]any)
		id, _ := in["id"].(string)
		switch ev["event"] {
		case "added", "updated":
			md, _ := in["metadata"].(map[string]any)
			got[id], _ = md["v"].(string)
		case "removed":
			delete(got, id)
		}
	}
}
