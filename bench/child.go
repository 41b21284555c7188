package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-io/switchboard/internal/cputime"
)

// Parameters and results of the children's roles.
type (
	churnArg struct {
		Name   string        // the writer's entry name
		Window time.Duration // how long it churns after "go"
	}
	churnResult struct {
		Ops      int64   // calls that succeeded (2.8 per round)
		Errors   int64   // calls that failed
		FirstErr string  // the first failure
		Seconds  float64 // the churn as the child timed it
		CPU      float64 // seconds of this process's CPU during the churn
	}
	watchArg struct {
		Watchers int // watches this process holds
	}
	watchResult struct {
		Latency []float64 // ms from the writer's stamp to the event, every watcher's
		Missing int       // events the watchers had not seen after the wait
	}
	fleetArg struct {
		Name     string
		N        int  // entries this process holds
		NoReaper bool // Switchboard: Bootstrap with DisableReaper
	}
	fleetResult struct {
		CPU      float64 // seconds of this process's CPU between "go" and "end"
		Seconds  float64
		Renewals int64 // entries renewed between "go" and "end"
		Failures int64 // renewals failed and leases lost between "go" and "end"
		Total    int64 // the same since the process started (its registrations included)
		Reregs   int64
	}
)

// runChild is a child process: it reaches the store of storeEnv and plays
// role. It returns the exit code.
func runChild(role string) int {
	fail := func(err error) int {
		fmt.Printf("error: %s: %v\n", role, err)
		return 1
	}
	var st store
	if err := json.Unmarshal([]byte(os.Getenv(storeEnv)), &st); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := dial(ctx, st)
	if err != nil {
		return fail(err)
	}
	// A fleet child exits without deregistering (the store is thrown away).
	defer func() {
		if role != "fleet" {
			c.close()
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	wait := func(prefix string) (string, error) {
		if !in.Scan() {
			return "", fmt.Errorf("stdin closed before %q", prefix)
		}
		return in.Text(), nil
	}
	var res any
	switch role {
	case "churn":
		res, err = churnChild(ctx, c, wait)
	case "watch":
		res, err = watchChild(ctx, c, wait)
	case "fleet":
		res, err = fleetChild(ctx, c, wait)
	default:
		err = fmt.Errorf("unknown role")
	}
	if err != nil {
		return fail(err)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	// Stay until the parent is done (a fleet keeps renewing while the
	// parent counts the live entries; the server's backends of a churn
	// writer stay for the parent's last CPU reading).
	for in.Scan() {
	}
	return 0
}

func arg(v any) error {
	return json.Unmarshal([]byte(os.Getenv(argEnv)), v)
}

// churnChild loops register → heartbeat → deregister (4 of 5 rounds) of a
// fresh entry for the window after "go".
func churnChild(ctx context.Context, c client, wait func(string) (string, error)) (any, error) {
	var a churnArg
	if err := arg(&a); err != nil {
		return nil, err
	}
	fmt.Println("ready")
	if _, err := wait("go"); err != nil {
		return nil, err
	}
	var res churnResult
	note := func(err error) bool {
		if err == nil {
			res.Ops++
			return true
		}
		res.Errors++
		if res.FirstErr == "" {
			res.FirstErr = err.Error()
		}
		return false
	}
	cpu0, t0 := cputime.Process(), time.Now()
	end := t0.Add(a.Window)
	for i := int64(1); time.Now().Before(end); i++ {
		id, err := c.register(ctx, a.Name, i, 0)
		if !note(err) {
			continue
		}
		if !note(c.heartbeat(ctx, id)) {
			continue
		}
		if i%5 != 0 {
			note(c.deregister(ctx, id))
		}
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPU = (cputime.Process() - cpu0).Seconds()
	return res, nil
}

// watchChild holds a.Watchers watches, each recording the latency of every
// entry added after "go"; at "end N" it waits (at most 30 s) until each
// has seen N.
func watchChild(ctx context.Context, c client, wait func(string) (string, error)) (any, error) {
	var a watchArg
	if err := arg(&a); err != nil {
		return nil, err
	}
	counters := make([]*counter, a.Watchers)
	for i := range counters {
		counters[i] = &counter{}
		if err := c.watch(ctx, counters[i].add); err != nil {
			return nil, err
		}
	}
	fmt.Println("ready")
	if _, err := wait("go"); err != nil {
		return nil, err
	}
	l, err := wait("end")
	if err != nil {
		return nil, err
	}
	var want int
	if _, err := fmt.Sscanf(l, "end %d", &want); err != nil {
		return nil, fmt.Errorf("%q: %v", l, err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		done := true
		for _, k := range counters {
			done = done && k.len() >= want
		}
		if done {
			break
		}
	}
	var res watchResult
	for _, k := range counters {
		k.mu.Lock()
		res.Latency = append(res.Latency, k.lat...)
		res.Missing += max(0, want-len(k.lat))
		k.mu.Unlock()
	}
	return res, nil
}

// fleetChild holds a.N entries renewed every second and measures its own
// CPU between "go" and "end".
func fleetChild(ctx context.Context, c client, wait func(string) (string, error)) (any, error) {
	var a fleetArg
	if err := arg(&a); err != nil {
		return nil, err
	}
	stats, err := c.hold(ctx, a.Name, a.N, !a.NoReaper)
	if err != nil {
		return nil, err
	}
	fmt.Println("ready")
	if _, err := wait("go"); err != nil {
		return nil, err
	}
	cpu0, t0, s0 := cputime.Process(), time.Now(), stats()
	if _, err := wait("end"); err != nil {
		return nil, err
	}
	s1 := stats()
	return fleetResult{
		CPU:      (cputime.Process() - cpu0).Seconds(),
		Seconds:  time.Since(t0).Seconds(),
		Renewals: s1.Renewals - s0.Renewals,
		Failures: s1.Failures - s0.Failures,
		Total:    s1.Failures,
		Reregs:   s1.Reregs,
	}, nil
}
