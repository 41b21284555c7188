package main

import (
	"context"
	"fmt"
	"log"
	"time"
)

// churnRow is the write churn of one system.
type churnRow struct {
	OpsPerSec   float64
	Errors      int64
	FirstErr    string
	ClientCores float64 // the writers' CPU over the window
	ServerCores float64
}

// measureChurn runs procs writer processes, each looping register →
// heartbeat → deregister (4 of 5) for window, and sums their calls.
func measureChurn(ctx context.Context, sys system, procs int, window time.Duration) (churnRow, error) {
	st, pids, cleanup, err := sys.fresh(ctx, "churn")
	if err != nil {
		return churnRow{}, err
	}
	defer cleanup()
	// Create the store before the writers start (schema, file).
	if err := touch(ctx, st); err != nil {
		return churnRow{}, err
	}
	cs, err := spawnAll("churn", st, procs, func(i int) any {
		return churnArg{Name: fmt.Sprintf("churn-%d", i), Window: window}
	}, 2*time.Minute)
	if err != nil {
		return churnRow{}, err
	}
	defer stopAll(cs)
	srv0 := cpuOf(pids())
	for _, c := range cs {
		c.send("go")
	}
	var row churnRow
	var cpu float64
	for _, c := range cs {
		var r churnResult
		if err := c.result(&r, window+2*time.Minute); err != nil {
			return churnRow{}, err
		}
		row.OpsPerSec += float64(r.Ops) / r.Seconds
		row.Errors += r.Errors
		if row.FirstErr == "" {
			row.FirstErr = r.FirstErr
		}
		cpu += r.CPU
	}
	srv := cpuDelta(srv0, cpuOf(pids()))
	row.ClientCores = cpu / window.Seconds()
	row.ServerCores = srv.Seconds() / window.Seconds()
	return row, nil
}

// touch opens the store once and closes it: a Switchboard catalog is
// created (file, schema) by its first Open.
func touch(ctx context.Context, st store) error {
	c, err := dial(ctx, st)
	if err != nil {
		return err
	}
	return c.close()
}

// latRow is the register → watcher latency of one system at one number of
// watchers.
type latRow struct {
	Watchers, Procs int
	P50, P99        float64 // ms
	Samples         int
	Missing         int
}

// measureLatency registers changes new entries from this process, one per
// interval, each stamped with the wall clock just before the write, while
// watchers watches spread over procs other processes each record the time
// from the stamp to the event.
func measureLatency(ctx context.Context, sys system, watchers, procs, changes int, interval time.Duration) (latRow, error) {
	st, _, cleanup, err := sys.fresh(ctx, fmt.Sprintf("lat%d", watchers))
	if err != nil {
		return latRow{}, err
	}
	defer cleanup()
	w, err := dial(ctx, st)
	if err != nil {
		return latRow{}, err
	}
	defer w.close()
	procs = max(1, min(procs, watchers))
	cs, err := spawnAll("watch", st, procs, func(i int) any {
		n := watchers / procs
		if i < watchers%procs {
			n++
		}
		return watchArg{Watchers: n}
	}, 2*time.Minute)
	if err != nil {
		return latRow{}, err
	}
	defer stopAll(cs)
	for _, c := range cs {
		c.send("go")
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range changes {
		<-tick.C
		if _, err := w.register(ctx, "lat", int64(i), time.Now().UnixNano()); err != nil {
			return latRow{}, fmt.Errorf("register: %w", err)
		}
	}
	for _, c := range cs {
		c.send("end %d", changes)
	}
	row := latRow{Watchers: watchers, Procs: procs}
	var all []float64
	for _, c := range cs {
		var r watchResult
		if err := c.result(&r, 2*time.Minute); err != nil {
			return latRow{}, err
		}
		all = append(all, r.Latency...)
		row.Missing += r.Missing
	}
	row.Samples = len(all)
	row.P50, row.P99 = quantile(all, 0.50), quantile(all, 0.99)
	return row, nil
}

// fleetRow is the heartbeat fleet on one system.
type fleetRow struct {
	Procs, Each    int
	ClientCores    float64
	ServerCores    float64
	Failures       int64 // renewals failed and leases lost in the window, processes lost in it
	StartFailures  int64 // renewals failed before the window (while the fleet registered)
	Lost           int   // processes that failed to start
	Reregs         int64
	Live, Want     int
	RenewalsPerSec float64
	ServerProcs    int // server processes while the fleet ran (PostgreSQL: its backends)
}

// fleetShape is the fleet's size and timing.
type fleetShape struct {
	each           int           // registrations per process
	noReaper       bool          // Switchboard: Bootstrap without this process's reaper
	stagger, start time.Duration // between process starts; for every process to be ready
	warmup, window time.Duration // settling, not measured; measured
}

// measureFleet starts procs processes, each holding f.each entries renewed
// every second, lets them settle for f.warmup, then measures their CPU (each
// its own getrusage) and the server's over f.window. A process not ready
// within f.start counts as failed to start.
func measureFleet(ctx context.Context, sys system, procs int, f fleetShape) (fleetRow, error) {
	each, warmup, window := f.each, f.warmup, f.window
	st, pids, cleanup, err := sys.fresh(ctx, "fleet")
	if err != nil {
		return fleetRow{}, err
	}
	defer cleanup()
	if err := touch(ctx, st); err != nil {
		return fleetRow{}, err
	}
	t0 := time.Now()
	cs, failed, err := spawnSome("fleet", st, procs, func(i int) any {
		return fleetArg{Name: fmt.Sprintf("fleet-%d", i), N: each, NoReaper: f.noReaper}
	}, f.stagger, f.start)
	if err != nil {
		return fleetRow{}, err
	}
	defer stopAll(cs)
	log.Printf("  %d processes × %d ready after %s", len(cs), each, time.Since(t0).Round(time.Millisecond))
	row := fleetRow{Procs: procs, Each: each, Want: procs * each, Lost: len(failed)}
	if len(failed) > 0 {
		// A process that could not register is a failure of the fleet.
		log.Printf("  %d processes failed to start, the first: %v", len(failed), failed[0])
		if len(cs) == 0 {
			return fleetRow{}, failed[0]
		}
	}
	time.Sleep(warmup)
	srv0 := cpuOf(pids())
	row.ServerProcs = len(srv0)
	start := time.Now()
	for _, c := range cs {
		c.send("go")
	}
	time.Sleep(window)
	srv := cpuDelta(srv0, cpuOf(pids()))
	secs := time.Since(start).Seconds()
	for _, c := range cs {
		c.send("end")
	}
	var cpu float64
	for _, c := range cs {
		var r fleetResult
		if err := c.result(&r, 2*time.Minute); err != nil {
			log.Printf("  %v", err)
			row.Failures++
			continue
		}
		cpu += r.CPU
		row.Failures += r.Failures
		row.StartFailures += r.Total - r.Failures
		row.Reregs += r.Reregs
		row.RenewalsPerSec += float64(r.Renewals) / r.Seconds
	}
	row.ClientCores = cpu / secs
	row.ServerCores = srv.Seconds() / secs
	c, err := dial(ctx, st)
	if err != nil {
		return fleetRow{}, err
	}
	defer c.close()
	if row.Live, err = c.live(ctx); err != nil {
		return fleetRow{}, err
	}
	return row, nil
}
