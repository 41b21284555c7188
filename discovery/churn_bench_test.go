package discovery_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

// The churn benchmark's children are this test binary run again with
// churnRoleEnv set: TestMain hands them to churnChild.
const (
	churnRoleEnv = "SWITCHBOARD_CHURN_ROLE"
	churnDSNEnv  = "SWITCHBOARD_CHURN_DSN"
	churnPollEnv = "SWITCHBOARD_CHURN_POLL"
)

var (
	churnWindow = flag.Duration("churn-window", 30*time.Second, "how long BenchmarkChurn measures the changes")
	churnWarmup = flag.Duration("churn-warmup", 0, "how long BenchmarkChurn changes the catalog before it starts measuring")
	churnPoll   = flag.Duration("churn-poll", 0, "the children's catalog PollInterval, their full resync (0: the default, 30 s)")
)

func TestMain(m *testing.M) {
	if role := os.Getenv(churnRoleEnv); role != "" {
		os.Exit(churnChild(role, os.Getenv(churnDSNEnv)))
	}
	os.Exit(m.Run())
}

// churnResult is what a child reports when the churn ends.
type churnResult struct {
	CPU     float64   // seconds of CPU (user + system, getrusage) during the churn
	Faults  int64     // minor page faults during the churn (getrusage)
	Wall    float64   // seconds the churn lasted, as the child saw it
	Latency []float64 // ms from just before Register to the event / the lookup, one per change
	Sent    []int64   // the change each latency is for (its stamp)
}

// BenchmarkChurn compares, in one run, a process holding a discovery cache
// with a process holding a bare Catalog.Watch, both following one SQLite
// file of n instances while this process re-registers instances at 100
// changes per second (an update of one metadata value each, round robin
// over the fleet). Each child measures its own CPU and page faults with
// getrusage over the churn window, and each change's latency from just
// before Register (the registering process stamps the wall clock into the
// instance's metadata) to the moment the bare watch receives the event, or
// the cache's lookup (Get) returns the new version. Children are this test
// binary. Run with -benchtime 1x; the window is 30 s (-churn-window). With
// -churn-warmup the churn runs that long before the window opens,
// unmeasured, so that the children's heaps grow to their steady size
// (into pages the process never touched, a page fault each) before the
// window rather than in it. Both children's hubs re-read the whole table
// every PollInterval (30 s by default, -churn-poll): that read delays the
// changes behind it in both processes (by seconds at 100,000 rows) and so
// sets both p99s.
func BenchmarkChurn(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("n=%d/100-changes-per-s", n), func(b *testing.B) {
			for b.Loop() {
				benchChurn(b, n, 100, *churnWarmup, *churnWindow)
			}
		})
	}
}

func churnInstance(i int, sent int64) switchboard.Instance {
	in := discovery.FleetInstance(i)
	in.Metadata = map[string]string{"zone": in.Metadata["zone"], "sent": strconv.FormatInt(sent, 10)}
	in.RegisteredAt, in.LastSeen = time.Time{}, time.Time{}
	in.TTL = time.Hour // the churn is about changes, not expiry
	return in
}

// churnStamp returns the stamp a change carries in its "sent" metadata and
// whether it is timed: the snapshot's rows carry 0, the warm-up's changes a
// negative stamp, the window's the wall clock at their Register.
func churnStamp(in *switchboard.Instance) (int64, bool) {
	sent, err := strconv.ParseInt(in.Metadata["sent"], 10, 64)
	return sent, err == nil && sent > 0
}

func benchChurn(b *testing.B, n, rate int, warmup, window time.Duration) {
	dsn := "sqlite://" + filepath.Join(b.TempDir(), "churn.db")
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	// The fleet, by 8 concurrent writers.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := cat.Register(ctx, churnInstance(i, 0)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}

	type child struct {
		stdin io.WriteCloser
		lines chan string
	}
	start := func(role string) *child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), churnRoleEnv+"="+role, churnDSNEnv+"="+dsn, churnPollEnv+"="+churnPoll.String())
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := &child{stdin: in, lines: make(chan string, 16)}
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
		}()
		b.Cleanup(func() { in.Close(); cmd.Wait() })
		return c
	}
	next := func(c *child, role string) string {
		select {
		case l, ok := <-c.lines:
			if !ok {
				b.Fatalf("%s child exited early", role)
			}
			return l
		case <-time.After(5 * time.Minute):
			b.Fatalf("%s child silent", role)
		}
		return ""
	}
	roles := []string{"watch", "cache"}
	children := map[string]*child{}
	for _, r := range roles {
		children[r] = start(r)
	}
	for _, r := range roles {
		if l := next(children[r], r); l != "ready" {
			b.Fatalf("%s child: %q", r, l)
		}
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	// The warm-up's changes carry a negative stamp, which the children
	// neither time nor count.
	k := 0
	for end := time.Now().Add(warmup); time.Now().Before(end); k++ {
		<-tick.C
		if _, err := cat.Register(ctx, churnInstance(k*7919%n, int64(-1-k))); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range roles {
		fmt.Fprintln(children[r].stdin, "go")
	}
	changes := 0
	for end := time.Now().Add(window); time.Now().Before(end); changes++ {
		<-tick.C
		if _, err := cat.Register(ctx, churnInstance((k+changes)*7919%n, time.Now().UnixNano())); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	results := map[string]churnResult{}
	for _, r := range roles {
		fmt.Fprintln(children[r].stdin, "end", changes)
	}
	for _, r := range roles {
		var res churnResult
		if err := json.Unmarshal([]byte(next(children[r], r)), &res); err != nil {
			b.Fatalf("%s child: %v", r, err)
		}
		if len(res.Latency) != changes {
			b.Fatalf("%s child saw %d of %d changes", r, len(res.Latency), changes)
		}
		results[r] = res
	}
	b.ReportMetric(float64(changes)/window.Seconds(), "changes/s")
	for _, r := range roles {
		res := results[r]
		b.ReportMetric(res.CPU/res.Wall, r+"-cores")
		b.ReportMetric(float64(res.Faults)/res.Wall, r+"-faults/s")
		b.ReportMetric(discovery.Quantile(res.Latency, 0.50), r+"-p50-ms")
		b.ReportMetric(discovery.Quantile(res.Latency, 0.99), r+"-p99-ms")
	}
	// What the cache adds to each change, over what the bare watch in the
	// other process took for the same change: the write, the machine's
	// scheduling and the catalog's own stalls cancel out.
	watched := map[int64]float64{}
	for i, s := range results["watch"].Sent {
		watched[s] = results["watch"].Latency[i]
	}
	var added []float64
	for i, s := range results["cache"].Sent {
		added = append(added, results["cache"].Latency[i]-watched[s])
	}
	b.ReportMetric(discovery.Quantile(added, 0.50), "cache-minus-watch-p50-ms")
	b.ReportMetric(discovery.Quantile(added, 0.99), "cache-minus-watch-p99-ms")
}

// churnChild follows dsn as role ("watch": a bare Catalog.Watch; "cache":
// a discovery cache), prints "ready" once synced, starts measuring at the
// "go" line, and at the line "end N" waits until it has seen the N changes
// (at most two minutes), stops measuring and prints its churnResult.
func churnChild(role, dsn string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, role+":", err); return 1 }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poll, err := time.ParseDuration(os.Getenv(churnPollEnv))
	if err != nil {
		return fail(err)
	}
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: slog.New(slog.DiscardHandler), PollInterval: poll})
	if err != nil {
		return fail(err)
	}
	defer cat.Close()
	var mu sync.Mutex
	var lat []float64
	var sents []int64
	record := func(in *switchboard.Instance) {
		sent, ok := churnStamp(in)
		if !ok {
			return
		}
		d := time.Since(time.Unix(0, sent))
		mu.Lock()
		lat = append(lat, float64(d.Microseconds())/1000)
		sents = append(sents, sent)
		mu.Unlock()
	}
	switch role {
	case "watch":
		ch, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			return fail(err)
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		go func() {
			for ev := range ch {
				if ev.Kind == switchboard.EventUpdated || ev.Kind == switchboard.EventAdded {
					record(&ev.Instance)
				}
			}
		}()
	case "cache":
		var c *discovery.Cache
		ready := make(chan struct{})
		c, err = discovery.New(ctx, cat, discovery.Options{Logger: slog.New(slog.DiscardHandler), OnEvent: func(ev switchboard.Event) {
			if _, timed := churnStamp(&ev.Instance); !timed || ev.Kind != switchboard.EventUpdated && ev.Kind != switchboard.EventAdded {
				return // the snapshot's, or a change of the warm-up
			}
			<-ready
			// Register → lookup: the time a lookup returns the new version.
			if in, ok := c.Get(ev.Instance.ID); ok && in.Metadata["sent"] == ev.Instance.Metadata["sent"] {
				record(&in)
			}
		}})
		if err != nil {
			return fail(err)
		}
		close(ready)
		defer c.Close()
	default:
		return fail(fmt.Errorf("unknown role"))
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return fail(fmt.Errorf("no go"))
	}
	cpu0, flt0, t0 := cputime.Process(), cputime.MinorFaults(), time.Now()
	var want int
	if !in.Scan() {
		return fail(fmt.Errorf("no end"))
	}
	if _, err := fmt.Sscanf(in.Text(), "end %d", &want); err != nil {
		return fail(err)
	}
	seen := func() int { mu.Lock(); defer mu.Unlock(); return len(lat) }
	for deadline := time.Now().Add(2 * time.Minute); seen() < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	res := churnResult{CPU: (cputime.Process() - cpu0).Seconds(), Faults: cputime.MinorFaults() - flt0, Wall: time.Since(t0).Seconds()}
	mu.Lock()
	res.Latency, res.Sent = lat, sents
	mu.Unlock()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return 0
}
