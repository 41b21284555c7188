// Command leaser takes leases of a switchboard catalog as an application
// does, through the library of the release it is built with: the package
// upgradetest builds it from both releases' sources and drives the two
// programs against one catalog, so that one release's holder meets the
// other's contender.
//
// Usage: leaser DSN. It opens the catalog, prints {"event":"open"}, then
// reads one command a line from stdin, "SEQ OP ARGS...", and answers each
// with one JSON line carrying its seq and op:
//
//	SEQ elect NAME HOLDER TTL    contend for NAME with package election
//	SEQ resign NAME HOLDER       stop that election (its lease is released)
//	SEQ acquire NAME HOLDER TTL  one Leaser.Acquire: token, or held
//	SEQ release NAME HOLDER      Leaser.Release of the lease acquire took
//	SEQ leases                   Leaser.Leases
//	SEQ steal NAME               Leaser.Release of NAME as Leases lists it
//	                             (its holder and token), as another
//	                             process that read the list would
//
// An election prints {"event":"elected",...} when it takes the lease and
// {"event":"lost",...} when its leadership ends (a resign ends it too).
// At the end of stdin it resigns every election and exits.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/election"
	_ "github.com/switchboard-io/switchboard/postgres"
	_ "github.com/switchboard-io/switchboard/remote"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// lease is the JSON form of a switchboard.Lease.
type lease struct {
	Name      string `json:"name"`
	Holder    string `json:"holder"`
	Token     int64  `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// line is one line of output: an answer to a command (Seq and Op) or an
// event.
type line struct {
	Seq    int     `json:"seq,omitempty"`
	Op     string  `json:"op,omitempty"`
	Event  string  `json:"event,omitempty"`
	Name   string  `json:"name,omitempty"`
	Holder string  `json:"holder,omitempty"`
	Token  int64   `json:"token,omitempty"`
	Held   bool    `json:"held,omitempty"`
	Leases []lease `json:"leases,omitempty"`
	Err    string  `json:"err,omitempty"`
}

var outMu sync.Mutex

func emit(l line) {
	b, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf("%s\n", b)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: leaser DSN")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, os.Args[1], switchboard.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaser:", err)
		os.Exit(1)
	}
	defer cat.Close()
	leaser, ok := cat.(switchboard.Leaser)
	if !ok {
		fmt.Fprintln(os.Stderr, "leaser: the catalog offers no leases")
		os.Exit(1)
	}
	emit(line{Event: "open"})

	elections := map[string]*running{}         // by name and holder
	acquired := map[string]switchboard.Lease{} // by name and holder
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var seq int
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			fmt.Fprintf(os.Stderr, "leaser: bad command %q\n", sc.Text())
			os.Exit(2)
		}
		if _, err := fmt.Sscan(f[0], &seq); err != nil {
			fmt.Fprintf(os.Stderr, "leaser: bad seq in %q\n", sc.Text())
			os.Exit(2)
		}
		ans := line{Seq: seq, Op: f[1]}
		arg := func(i int) string {
			if i+2 < len(f) {
				return f[i+2]
			}
			fmt.Fprintf(os.Stderr, "leaser: %q: missing argument %d\n", sc.Text(), i+1)
			os.Exit(2)
			return ""
		}
		ttl := func(i int) time.Duration {
			d, err := time.ParseDuration(arg(i))
			if err != nil {
				fmt.Fprintf(os.Stderr, "leaser: %q: %v\n", sc.Text(), err)
				os.Exit(2)
			}
			return d
		}
		switch f[1] {
		case "elect":
			name, holder, d := arg(0), arg(1), ttl(2)
			key := name + " " + holder
			ectx, cancel := context.WithCancel(ctx)
			e, err := election.New(leaser, name, holder, election.Config{TTL: d, Logger: log,
				OnElected: func(_ context.Context, l switchboard.Lease) {
					emit(line{Event: "elected", Name: name, Holder: holder, Token: l.Token})
				},
				OnLost: func() { emit(line{Event: "lost", Name: name, Holder: holder}) },
			})
			if err != nil {
				cancel()
				ans.Err = err.Error()
				break
			}
			r := &running{cancel: cancel, done: make(chan error, 1)}
			elections[key] = r
			go func() { r.done <- e.Run(ectx) }()
		case "resign":
			key := arg(0) + " " + arg(1)
			r, ok := elections[key]
			if !ok {
				ans.Err = "no such election"
				break
			}
			delete(elections, key)
			r.cancel()
			if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
				ans.Err = err.Error()
			}
		case "acquire":
			name, holder := arg(0), arg(1)
			l, err := leaser.Acquire(ctx, name, holder, ttl(2))
			switch {
			case errors.Is(err, switchboard.ErrLeaseHeld):
				ans.Held = true
			case err != nil:
				ans.Err = err.Error()
			default:
				acquired[name+" "+holder] = l
				ans.Token = l.Token
			}
		case "release":
			key := arg(0) + " " + arg(1)
			l, ok := acquired[key]
			if !ok {
				ans.Err = "not acquired here"
				break
			}
			delete(acquired, key)
			if err := leaser.Release(ctx, l); err != nil {
				ans.Err = err.Error()
			}
		case "leases":
			list, err := leaser.Leases(ctx)
			if err != nil {
				ans.Err = err.Error()
				break
			}
			ans.Leases = []lease{}
			for _, l := range list {
				ans.Leases = append(ans.Leases, lease{Name: l.Name, Holder: l.Holder, Token: l.Token,
					ExpiresAt: l.ExpiresAt.UTC().Format(time.RFC3339Nano)})
			}
		case "steal":
			list, err := leaser.Leases(ctx)
			if err != nil {
				ans.Err = err.Error()
				break
			}
			i := slices.IndexFunc(list, func(l switchboard.Lease) bool { return l.Name == arg(0) && l.Holder != "" })
			if i < 0 {
				ans.Err = "no such lease held"
				break
			}
			ans.Holder, ans.Token = list[i].Holder, list[i].Token
			if err := leaser.Release(ctx, list[i]); err != nil {
				ans.Err = err.Error()
			}
		default:
			fmt.Fprintf(os.Stderr, "leaser: unknown command %q\n", sc.Text())
			os.Exit(2)
		}
		emit(ans)
	}
	for _, r := range elections {
		r.cancel()
		<-r.done
	}
}
