package upgradetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// leaserLine is one line of a leaser's output (testdata/leaser): the
// answer to a command (Seq, Op) or an event.
type leaserLine struct {
	Seq    int    `json:"seq"`
	Op     string `json:"op"`
	Event  string `json:"event"`
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
	Held   bool   `json:"held"`
	Leases []struct {
		Name      string `json:"name"`
		Holder    string `json:"holder"`
		Token     int64  `json:"token"`
		ExpiresAt string `json:"expires_at"`
	} `json:"leases"`
	Err string `json:"err"`
}

// leaser is a running leaser program, driven command by command.
type leaser struct {
	*proc
	seq int
}

// startLeaser runs bin (a leaser) on dsn and waits until it has opened
// the catalog (migrating it, for the new release's on a direct DSN).
func startLeaser(t *testing.T, name, bin, dsn string, env []string) *leaser {
	t.Helper()
	l := &leaser{proc: startInput(t, name, bin, env, dsn)}
	l.await(t, name+" to open its catalog", func(x leaserLine) bool { return x.Event == "open" })
	return l
}

// await waits until l has printed a line match accepts and returns it
// (proc.waitLine).
func (l *leaser) await(t *testing.T, what string, match func(leaserLine) bool) leaserLine {
	t.Helper()
	s := l.waitLine(t, what, func(s string) bool { return match(decodeLine[leaserLine](t, l.proc, s)) })
	return decodeLine[leaserLine](t, l.proc, s)
}

// try sends cmd and returns its answer, error or not.
func (l *leaser) try(t *testing.T, cmd string) leaserLine {
	t.Helper()
	l.seq++
	seq := l.seq
	if _, err := fmt.Fprintf(l.in, "%d %s\n", seq, cmd); err != nil {
		t.Fatalf("%s: %s: %v", l.name, cmd, err)
	}
	return l.await(t, fmt.Sprintf("%s to answer %q", l.name, cmd), func(x leaserLine) bool { return x.Seq == seq })
}

// do is try that fails t when the command failed.
func (l *leaser) do(t *testing.T, cmd string) leaserLine {
	t.Helper()
	ans := l.try(t, cmd)
	if ans.Err != "" {
		t.Fatalf("%s: %s: %s", l.name, cmd, ans.Err)
	}
	return ans
}

// event returns the token of l's event kind ("elected", "lost") for
// holder, and whether there is one.
func (l *leaser) event(t *testing.T, kind, holder string) (int64, bool) {
	t.Helper()
	for _, x := range decodeLines[leaserLine](t, l.proc) {
		if x.Event == kind && x.Holder == holder {
			return x.Token, true
		}
	}
	return 0, false
}

// elected waits for l's election as holder and returns its token.
func (l *leaser) elected(t *testing.T, holder string) int64 {
	t.Helper()
	var token int64
	waitFor(t, l.name+" to be elected as "+holder, func() bool {
		var ok bool
		token, ok = l.event(t, "elected", holder)
		return ok
	})
	return token
}

// holderName is the holder's name of a stored holder: a lease taken
// through a new server is stored with its secret's hash after U+001F,
// which an old server lists as it is.
func holderName(stored string) string {
	name, _, _ := strings.Cut(stored, "\x1f")
	return name
}

// keeps waits until lister has seen the lease L renewed (two expiries)
// while holder holds it with token, and checks that the election of
// contender (run by the other release) has taken nothing meanwhile.
func keeps(t *testing.T, lister *leaser, holder string, token int64, owner *leaser, contender *leaser, contenderName string) {
	t.Helper()
	expiries := map[string]bool{}
	waitFor(t, fmt.Sprintf("%s to see L renewed by %s", lister.name, holder), func() bool {
		var found bool
		for _, le := range lister.do(t, "leases").Leases {
			if le.Name != "L" {
				continue
			}
			found = true
			if holderName(le.Holder) != holder || le.Token != token {
				t.Fatalf("lease L is held by %q with token %d; want %s's token %d", le.Holder, le.Token, holder, token)
			}
			expiries[le.ExpiresAt] = true
		}
		if !found {
			t.Fatalf("%s does not list the lease L", lister.name)
		}
		return len(expiries) >= 2
	})
	if _, lost := owner.event(t, "lost", holder); lost {
		t.Fatalf("%s lost the lease while %s contended", holder, contenderName)
	}
	if _, won := contender.event(t, "elected", contenderName); won {
		t.Fatalf("%s was elected while %s held the lease", contenderName, holder)
	}
}

// leaseTTL is the TTL of every lease here: elections renew every third
// of it, and a contender tries as often.
const leaseTTL = "3s"

// cli is a switchboard binary and the DSN its commands use.
type cli struct{ bin, dsn string }

// cliLease is the part of a lease of `leases --json` every release prints.
type cliLease struct {
	Name, Holder string
	Token        int64
	Held         bool
}

// handOver checks, while h holds L as holder with token, that next (an
// election of c, the other release's leaser) can neither acquire L nor be
// elected; then h resigns, and next is elected with a higher token, which
// it returns.
func handOver(t *testing.T, h *leaser, holder string, token int64, c *leaser, next string) int64 {
	t.Helper()
	if a := c.do(t, "acquire L "+next+" "+leaseTTL); !a.Held {
		t.Fatalf("%s acquired L while %s held it: %+v", next, holder, a)
	}
	c.do(t, "elect L "+next+" "+leaseTTL)
	keeps(t, c, holder, token, h, c, next)
	h.do(t, "resign L "+holder)
	won := c.elected(t, next)
	if won <= token {
		t.Fatalf("%s's token %d is not above %s's %d", next, won, holder, token)
	}
	return won
}

// leasesBothWays runs, on one catalog, elections of the old release's
// leaser o and the new release's n for the lease L: the holder of each
// release keeps it while the other's contender runs, and once it resigns
// (releasing it) the other's is elected with a higher token; then plain
// Acquire and Release, each way. Each of lists' `leases --json` shows the
// first holder.
func leasesBothWays(t *testing.T, o, n *leaser, lists []cli) {
	o.do(t, "elect L old-1 "+leaseTTL)
	t1 := o.elected(t, "old-1")
	for _, c := range lists {
		out, stderr, err := run(t, c.bin, clientEnv, "--dsn", c.dsn, "leases", "--json")
		var list []cliLease
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("%s leases through %s: %v: %s%s", release(c.bin), c.dsn, err, out, stderr)
		}
		i := slices.IndexFunc(list, func(l cliLease) bool { return l.Name == "L" })
		if i < 0 || holderName(list[i].Holder) != "old-1" || list[i].Token != t1 || !list[i].Held {
			t.Fatalf("%s leases through %s: %s; want L held by old-1 with token %d", release(c.bin), c.dsn, out, t1)
		}
	}
	t2 := handOver(t, o, "old-1", t1, n, "new-1")
	t3 := handOver(t, n, "new-1", t2, o, "old-2")
	o.do(t, "resign L old-2")

	// Acquire and Release, without an election.
	t4 := n.do(t, "acquire L new-3 "+leaseTTL).Token
	if a := o.do(t, "acquire L old-3 "+leaseTTL); !a.Held || t4 <= t3 {
		t.Fatalf("new acquire after the release: token %d (last %d); old acquire then: %+v", t4, t3, a)
	}
	n.do(t, "release L new-3")
	t5 := o.do(t, "acquire L old-3 "+leaseTTL).Token
	if a := n.do(t, "acquire L new-4 "+leaseTTL); !a.Held || t5 <= t4 {
		t.Fatalf("old acquire after the release: token %d (last %d); new acquire then: %+v", t5, t4, a)
	}
	o.do(t, "release L old-3")
	if a := n.do(t, "acquire L new-4 "+leaseTTL); a.Held || a.Token <= t5 {
		t.Fatalf("new acquire after the old release: %+v (last token %d)", a, t5)
	}
	n.do(t, "release L new-4")
}

// Leases across releases, through the library of each (package election
// and switchboard.Leaser, as an application takes them): an old holder
// keeps its lease against a new contender and the reverse, and a release
// hands it to the other; on SQLite and PostgreSQL (the old leaser opens
// the catalog first, the new one migrates it under it), through an old
// serve (with both releases' leasers), and through an old serve and a new
// serve sharing one PostgreSQL catalog (each release's leaser through its
// own server). Through a new serve, an old leaser cannot keep a lease
// (oldClientCannotKeepLeaseThroughNewServer).
func TestLeasesAcrossReleases(t *testing.T) {
	old, cur := binaries(t)
	oldL, newL := leasers(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			dsn := b.dsn(t)
			o := startLeaser(t, "old leaser", oldL, dsn, nil)
			n := startLeaser(t, "new leaser", newL, dsn, nil)
			// The old `leases` refuses the migrated catalog.
			leasesBothWays(t, o, n, []cli{{cur, dsn}})
		})
	}
	t.Run("old serve", func(t *testing.T) {
		t.Parallel()
		url := startServe(t, "old serve", old, "sqlite://"+t.TempDir()+"/c.db")
		o := startLeaser(t, "old leaser", oldL, url, clientEnv)
		n := startLeaser(t, "new leaser", newL, url, clientEnv)
		leasesBothWays(t, o, n, []cli{{old, url}, {cur, url}})
	})
	t.Run("new serve", func(t *testing.T) {
		t.Parallel()
		url := startServe(t, "new serve", cur, "sqlite://"+t.TempDir()+"/c.db")
		o := startLeaser(t, "old leaser", oldL, url, clientEnv)
		n := startLeaser(t, "new leaser", newL, url, clientEnv)
		oldClientCannotKeepLeaseThroughNewServer(t, o, n)
	})
	t.Run("old and new serve on postgres", func(t *testing.T) {
		t.Parallel()
		db := backends[1].dsn(t)
		oldURL := startServe(t, "old serve", old, db)
		newURL := startServe(t, "new serve", cur, db)
		o := startLeaser(t, "old leaser", oldL, oldURL, clientEnv)
		n := startLeaser(t, "new leaser", newL, newURL, clientEnv)
		leasesBothWays(t, o, n, []cli{{old, oldURL}, {cur, oldURL}, {old, newURL}, {cur, newURL}})
		oldServerIgnoresLeaseSecrets(t, o, n)
	})
}

// oldClientCannotKeepLeaseThroughNewServer pins what a client of the old
// release gets from a new server: its acquire works (and the lease is
// held against the new release's client), but the secret the server
// issued with it is ignored by the old client and never sent back, so
// its release (and renewal) is refused as another client's would be.
// Clients that take leases through serve are upgraded before the servers
// (docs/upgrades.md). When oldRelease moves to a release that knows lease
// secrets, this becomes leasesBothWays.
func oldClientCannotKeepLeaseThroughNewServer(t *testing.T, o, n *leaser) {
	t.Helper()
	o.do(t, "acquire L old-1 "+leaseTTL)
	if a := n.do(t, "acquire L new-1 "+leaseTTL); !a.Held {
		t.Fatalf("the new release acquired L while the old one held it: %+v", a)
	}
	if r := o.try(t, "release L old-1"); r.Err == "" {
		t.Fatal("the old client released its lease through the new server without the secret it was issued")
	}
}

// oldServerIgnoresLeaseSecrets pins what an old server sharing the
// catalog with a new one does with a lease the new server took with a
// secret (n's, through the new server): it lists the holder as stored,
// with the secret's hash after U+001F, and releases the lease for a
// client of its own (o's) that names that holder and token, secret
// unchecked. When oldRelease moves to a release that knows lease secrets,
// this becomes: the release is refused.
func oldServerIgnoresLeaseSecrets(t *testing.T, o, n *leaser) {
	t.Helper()
	n.do(t, "acquire P new-p "+leaseTTL)
	st := o.try(t, "steal P")
	if holderName(st.Holder) != "new-p" || !strings.Contains(st.Holder, "\x1f") || st.Err != "" {
		t.Fatalf("the old server's client releasing the new one's lease as listed: %+v; want the holder with its hash, released", st)
	}
}
