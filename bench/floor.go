package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The floor is the fleet's shape with no catalog at all: each process
// sends its ids in one JSON POST a second, over net/http, to a server
// process that decodes them into an in-memory map and answers with the
// ids it did not know. It is what the same traffic costs any Go client and
// HTTP server tier on this host, the part of the `serve` tiers' CPU that
// Switchboard's own work cannot remove. Fleet only.

// floorRole is the child role of the floor's server process.
const floorRole = "floor-server"

// floorSystem starts one floor server process per measurement.
func floorSystem() system {
	return system{key: "floor", name: "bare Go HTTP server (the floor)", fresh: func(context.Context, string) (store, func() []int, func(), error) {
		exe, err := os.Executable()
		if err != nil {
			return store{}, nil, nil, err
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), roleEnv+"="+floorRole)
		return startServer(cmd, "floor", func() []int { return nil }, func() {})
	}}
}

// floorBody is a renewal as the floor's client sends it and its server
// answers it.
type floorBody struct {
	IDs     []string `json:"ids,omitempty"`
	Missing []string `json:"missing"`
}

// runFloorServer is the floor's server process: it says where it listens
// (as serve does) and serves until stopped.
func runFloorServer() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var (
		mu   sync.Mutex
		seen = map[string]time.Time{}
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /renew", func(w http.ResponseWriter, r *http.Request) {
		var in floorBody
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := floorBody{Missing: []string{}}
		add := r.URL.Query().Get("add") != ""
		now := time.Now()
		mu.Lock()
		for _, id := range in.IDs {
			if _, ok := seen[id]; !ok && !add {
				out.Missing = append(out.Missing, id)
				continue
			}
			seen[id] = now
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, r *http.Request) {
		n := 0
		mu.Lock()
		for _, t := range seen {
			if time.Since(t) <= fleetTTL {
				n++
			}
		}
		mu.Unlock()
		fmt.Fprintln(w, n)
	})
	fmt.Printf("floor: listening on http://%s\n", ln.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(ln, mux))
	return 1
}

// floorClient is a fleet process of the floor.
type floorClient struct {
	url  string
	http *http.Client
}

var errFloorFleetOnly = errors.New("the floor is measured in the fleet only")

func (c *floorClient) register(context.Context, string, int64, int64) (string, error) {
	return "", errFloorFleetOnly
}
func (c *floorClient) heartbeat(context.Context, string) error       { return errFloorFleetOnly }
func (c *floorClient) deregister(context.Context, string) error      { return errFloorFleetOnly }
func (c *floorClient) watch(context.Context, func(sent int64)) error { return errFloorFleetOnly }
func (c *floorClient) close() error                                  { return nil }

// renew posts ids; add makes the server take ids it does not know yet.
func (c *floorClient) renew(ctx context.Context, ids []string, add bool) error {
	body, err := json.Marshal(floorBody{IDs: ids})
	if err != nil {
		return err
	}
	u := c.url + "/renew"
	if add {
		u += "?add=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out floorBody
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("renew: %s: %w", resp.Status, err)
	}
	if len(out.Missing) > 0 {
		return fmt.Errorf("renew: %d ids missing", len(out.Missing))
	}
	return nil
}

// hold sends the n ids of name once to be added, then renews them all in
// one request a second, as a Switchboard process's heartbeat does.
func (c *floorClient) hold(ctx context.Context, name string, n int, _ bool) (func() holdStats, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = name + "/" + strconv.Itoa(i)
	}
	var setup int64
	if err := retry(ctx, &setup, func() error { return c.renew(ctx, ids, true) }); err != nil {
		return nil, err
	}
	var renewals, failures atomic.Int64
	failures.Store(setup)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, fleetTTL/2)
			if err := c.renew(rctx, ids, false); err != nil {
				failures.Add(int64(n))
			} else {
				renewals.Add(int64(n))
			}
			cancel()
		}
	}()
	return func() holdStats {
		return holdStats{Renewals: renewals.Load(), Failures: failures.Load()}
	}, nil
}

func (c *floorClient) live(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/live", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n int
	_, err = fmt.Fscan(resp.Body, &n)
	return n, err
}
