package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// BenchmarkRegisterToEvent measures the time from calling Register to the
// watcher receiving the added event, on the
// embedded SQLite default: a watcher in the same process, 100 watchers in
// the same process (until the last one has it), and a watcher in another OS
// process (a `switchboard watch --json` child, so the figure includes its
// JSON encoding and the pipe).
func BenchmarkRegisterToEvent(b *testing.B) {
	b.Run("same-process/1-watcher", func(b *testing.B) { benchInProcess(b, 1) })
	b.Run("same-process/100-watchers", func(b *testing.B) { benchInProcess(b, 100) })
	b.Run("two-processes/1-watcher", benchTwoProcesses)
}

func benchCatalog(b *testing.B) (switchboard.Catalog, string) {
	dsn := "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
	return openCatalog(b, dsn), dsn
}

func benchInProcess(b *testing.B, watchers int) {
	cat, _ := benchCatalog(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := make([]<-chan switchboard.Event, watchers)
	for i := range chans {
		ch, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		chans[i] = ch
	}
	var lat, notify []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("bench-%d", i), Type: "writer", Address: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		wrote := time.Now()
		for _, ch := range chans {
			awaitEvent(b, ch, switchboard.EventAdded, in.ID)
		}
		lat = append(lat, time.Since(start))
		notify = append(notify, time.Since(wrote))
		b.StopTimer()
		if err := cat.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		for _, ch := range chans {
			awaitEvent(b, ch, switchboard.EventRemoved, in.ID)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
	reportNotify(b, notify)
}

// reportNotify reports the part of the latency after Register returned:
// the push itself, without the SQLite write.
func reportNotify(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "push-p50-ms")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Microseconds())/1000, "push-p99-ms")
}

func benchTwoProcesses(b *testing.B) {
	cat, dsn := benchCatalog(b)
	ctx := context.Background()
	child := start(b, "watch", "--dsn", dsn, "--json")
	var lat, notify []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("bench-%d", i), Type: "writer", Address: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		wrote := time.Now()
		awaitLine(b, child, `"added"`, in.ID)
		lat = append(lat, time.Since(start))
		notify = append(notify, time.Since(wrote))
		b.StopTimer()
		if err := cat.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		awaitLine(b, child, `"removed"`, in.ID)
		b.StartTimer()
	}
	reportLatency(b, lat)
	reportNotify(b, notify)
}

func awaitEvent(b *testing.B, ch <-chan switchboard.Event, kind switchboard.EventKind, id string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind && ev.Instance.ID == id {
				return
			}
		case <-timeout:
			b.Fatalf("no %s event for %s", kind, id)
		}
	}
}

func awaitLine(b *testing.B, p *proc, kind, id string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				b.Fatalf("watcher exited: %s", p.stderr)
			}
			if strings.Contains(l, kind) && strings.Contains(l, id) {
				return
			}
		case <-timeout:
			b.Fatalf("no %s line for %s", kind, id)
		}
	}
}

// reportLatency reports the p50, p99 and max of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkFanout measures register → event at 100 watchers spread over 4
// OS processes (25 watches each, children re-running this test binary),
// until the last of the 100 has it, on both backends.
func BenchmarkFanout(b *testing.B) {
	b.Run("sqlite/100-watchers-4-processes", func(b *testing.B) {
		benchFanout(b, "sqlite://"+filepath.Join(b.TempDir(), "fanout.db"))
	})
	b.Run("postgres/100-watchers-4-processes", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, drop, err := pgtest.NewDatabase(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(drop)
		benchFanout(b, dsn)
	})
}

const (
	fanoutEnv    = "SWITCHBOARD_FANOUT_WATCHERS"
	fanoutDSNEnv = "SWITCHBOARD_FANOUT_DSN"
)

func benchFanout(b *testing.B, dsn string) {
	const procs, perProc = 4, 25
	cat := openCatalog(b, dsn)
	ctx := context.Background()
	children := make([]*exec.Cmd, procs)
	lines := make(chan string, 1024)
	for i := range children {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", fanoutEnv, perProc), fanoutDSNEnv+"="+dsn)
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { stdin.Close(); cmd.Wait() })
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		children[i] = cmd
	}
	for ready := 0; ready < procs; {
		if l := <-lines; l == "ready" {
			ready++
		}
	}
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("fan-%d", i), Type: "writer", Address: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		for got := 0; got < procs; {
			select {
			case l := <-lines:
				if l == in.ID {
					got++
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("only %d of %d processes heard of %s", got, procs, in.ID)
			}
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := cat.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
}

// fanoutChild is the child side of BenchmarkFanout: n watches on dsn; it
// prints "ready" once all are synced, then each instance id once all n
// watches have seen it added, until stdin closes.
func fanoutChild(n, dsn string) int {
	watchers, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cat.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	for i := 0; i < watchers; i++ {
		ch, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		go func() {
			for ev := range ch {
				if ev.Kind != switchboard.EventAdded {
					continue
				}
				mu.Lock()
				seen[ev.Instance.ID]++
				if seen[ev.Instance.ID] == watchers {
					delete(seen, ev.Instance.ID)
					fmt.Println(ev.Instance.ID)
				}
				mu.Unlock()
			}
		}()
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}
