// Package httpapi is the HTTP JSON API of `switchboard serve`: a stateless
// server in front of any catalog backend, so non-Go programs and fleets
// larger than one database's connections use the catalog through HTTP
// (the remote/ package is the Go client: http:// and https:// DSNs).
//
// # Endpoints
//
//	PUT    /v1/instances                  register (body: instance JSON, id optional) → {"instance":{…},"secret":"…"}
//	GET    /v1/instances?name=&type=&capability=&all=   list → [instance, …]
//	GET    /v1/instances/{id}             one instance (stale or not)
//	DELETE /v1/instances/{id}             deregister (X-Instance-Secret) → 204
//	PUT    /v1/instances/{id}/heartbeat   renew (X-Instance-Secret) → 204; 404 when the row is gone
//	POST   /v1/heartbeats                 renew many (at most 10,000): {"instances":[{"id":…,"secret":…}]} → {"missing":[…],"refused":[{"id","code","error"}]}
//	POST   /v1/reap?older_than=           reap → {"reaped":n} (a default reap within 1 s of the last, with no longer a grace, answers 0 at once)
//	POST   /v1/reap?reachable_for=        reap with the caller's post-outage grace (below)
//	GET    /v1/watch?<filters>            Server-Sent Events (below)
//	GET    /v1/now                        the catalog's clock → {"now":"…"}
//	GET    /v1/info                       version, backend, redacted DSN, health, counts, self-preservation, default_ttl (the catalog's default TTL, "10s"; absent when it does not say)
//	GET    /v1/leases?limit=&after=       [lease, …] by name, a page at a time (X-Next-After names the next page's start)
//	POST   /v1/leases/acquire             {"name","holder","ttl","secret"?} → lease with its "secret"; 409 lease_held
//	POST   /v1/leases/renew               {"name","holder","token","ttl","secret"} → lease; 409 lease_lost
//	POST   /v1/leases/release             {"name","holder","token","secret"} → 204; 409 lease_lost
//	GET    /healthz                       200 when the catalog answers (its clock and a read of its rows), else 503; 200 "degraded" with code no_catalog when its tables are gone (the next write recreates them: a 503 would take the server out of rotation); no token needed; with a Token set, the catalog's error only to a request carrying it
//	GET    /metrics                       Prometheus
//	GET    /v1/openapi.json               the OpenAPI 3 document of this API (openapi.json in this package; no token needed)
//	/                                     Options.UI, when set
//
// Instances are the JSON of the CLI contract (switchboard.Instance's
// MarshalJSON). Every error is {"error": "…", "field": "…", "code": "…"}:
// 400 (invalid, invalid_name, invalid_address) for a malformed or invalid
// request (a query parameter the endpoint does not take, or one given
// twice, included; so is a body not received within Options.BodyTimeout),
// 413 (too_large) above 1 MiB, 401 (unauthorized) for a missing
// token or secret, 403 (forbidden) for a wrong one (and for what needs the
// admin token, a Host not answered, a cross-origin write), 404 (not_found), 409
// (lease_held, lease_lost), 405 (method_not_allowed, with Allow), 415
// (unsupported_media_type) for a body not sent as application/json, 429
// (too_many_requests, with Retry-After) above a quota, 501
// (not_implemented) for leases on a catalog without them, 503
// (unavailable) when the catalog cannot be reached, 503 (no_catalog) when
// there is no catalog there (switchboard.ErrNoCatalog: its tables are
// missing), 503 (busy, with Retry-After) when the catalog stayed locked
// (switchboard.ErrBusy). Nothing stored changes on any error.
//
// # Credentials and roles
//
// Options.Token is the clients' token, and Options.Tokens more of them
// (each a credential of its own for the per-credential quotas below);
// Options.AdminToken the administrator's. A client registers, renews and deletes its own rows,
// holds its own leases, and reaps what is reapable (a default reap, or an
// older_than of at least twice the longest TTL); only the administrator
// reaps live rows, deletes another's row without its secret and releases
// another's lease (403 otherwise, saying what is needed). A server without
// any token answers only Host names that are IP addresses, localhost (and
// names under .localhost) or Options.AllowedHosts (403 else: DNS
// rebinding), lets any caller reap by age, and has no administrator.
// Every server refuses cross-origin browser requests that change state
// (net/http's CrossOriginProtection) and request bodies declared as
// anything but application/json (a body without a Content-Type only from
// a program, which sends neither Sec-Fetch-Site nor Origin). Each reap by age or that deleted rows, each delete of
// another's row, each lease release, each refused credential, steal
// attempt and refused request is one structured log line whose message
// starts with "audit: ".
//
// Quotas (Options.MaxInstances, MaxInstanceBytes, MaxLeases, MaxWatchers
// and MaxWatchersPerClient) answer 429 with Retry-After: a registration of
// a new id past the instances held, one whose body would take the memory
// of the instances held past its bound, an acquisition of a new lease name
// past the leases held, a watch past the streams open, in all or of one
// client (its role and IP address). The per-credential quotas
// (Options.MaxInstancesPerToken, MaxLeasesPerToken, MaxWatchersPerToken;
// none unless set) bound what one credential owns: the client token a
// request carries, or its IP address when it carries none; the admin
// token is exempt. A registration that would make the credential own one
// more live instance (a new id, an expired one, or another's), a new term
// of a lease past the leases it holds, and a watch past its open streams
// are answered 429 with Retry-After. The error's quota and limit fields
// name the quota reached (as its [http] setting) and its limit. What a
// credential owns is stored with it (its tag, in the salt of the secret's
// stored form, below), so servers sharing the catalog, and a server
// restarted, count the same; streams are counted by each server.
//
// # Secrets
//
// A registration returns a secret (or keeps the one the client sent in
// X-Instance-Secret). It is stored hashed with a salt of its own
// (SHA-256; rows of earlier releases hold a bare SHA-256, still read),
// which also carries the tag of the credential that registered the row
// (a PBKDF2 digest of its token, or a digest of its address; never the
// token),
// with the row, under a reserved metadata key that the API strips from
// every response and event; the secret itself is never stored, listed or
// logged. Heartbeat, deregister and re-register of that id need the
// secret, until the row expires (its owner stopped heartbeating): then
// anyone may register the id again and gets a new secret. Rows registered directly on the backend have no
// secret.
//
// A lease is acquired through the API with a secret of the client's own
// (the body's secret, or the X-Lease-Secret header, which servers of
// earlier releases ignore), stored hashed in the catalog's holder column
// after the holder's name (never shown): renewing, releasing, and
// acquiring it again as the same holder while it is held need it, so a
// client that read the lease's holder and token from the list cannot take
// it over. An acquire without a secret gets one issued, in the answer (a
// client of a release from before lease secrets, which never sends it
// back, cannot keep a lease through this server). A lease's TTL is at
// most Options.MaxLeaseTTL (1 h). Lease errors never name another holder
// or its token. A holder longer than 921 bytes leaves no room in the
// column for the secret: its lease is taken without one, as leases stored
// by earlier releases are.
//
// # Watch (Server-Sent Events)
//
// GET /v1/watch takes the filters of the list and streams, as
// text/event-stream:
//
//	retry: 1000
//
//	event: snapshot
//	data: {"event":"snapshot","fresh":false,"instances":2}
//
//	event: added
//	data: {"event":"added","instance":{…}}
//
//	event: added
//	data: {"event":"added","instance":{…}}
//
//	id: 3f9a01c2-41
//	event: synced
//	data: {"event":"synced"}
//
//	id: 3f9a01c2-42
//	event: removed
//	data: {"event":"removed","reason":"expired","instance":{…}}
//
//	: keep-alive
//
// A stream starts with a snapshot: a "snapshot" marker, the current set as
// "added" events, then "synced". Then each change is one event of the form
// of `watch --json` — "added", "updated", "removed" (reason
// "deregistered", "expired", "unknown", "check_failed" or
// "check_critical") — plus "error" ({"event":"error","error":"…"}) while the
// server cannot read the catalog and "synced" after it has caught up
// again. A heartbeat is never an event. Every event after the snapshot
// carries an id (<server epoch>-<sequence>, then ~<catalog position> on a
// catalog that gives positions: see below); snapshot events carry none, so
// a connection lost inside a snapshot never resumes from its middle. Each
// data field is one line of JSON. Comments (": keep-alive") arrive every
// KeepAlive (15 s) when nothing else does. When the server's own watch of
// the catalog ends for good (its catalog handle was closed), every stream
// gets a last "error" event saying so and ends, so its client reconnects
// (behind a load balancer, to another server; this one answers new
// watches with 503). An outage the server's watch recovers from ends no
// stream: "error", then "synced" once it has caught up. A watch the server
// cannot serve (its mirror has stopped, or has not read the catalog within
// 10 s) is answered 503 with the code of the mirror's last error, as any
// request gets it: no_catalog when the catalog is missing, busy, else
// unavailable; its text says which of the two happened and what to do
// (a stopped mirror serves no watch until the server is restarted).
//
// Reconnecting with Last-Event-ID (or ?last_event_id=, or ?lastEventId=
// as EventSource polyfills send it; an empty one is none) resumes without
// loss: the server replays the events after that id from its history
// (Options.History, 10,000 events, and
// Options.HistoryBytes, 64 MiB of the instances they hold), then sends "synced". When its
// history does not hold the id — another server or an earlier run of this
// one issued it, or the history no longer reaches back that far — and the
// id carries a catalog position the catalog can resume from
// (switchboard.WatchResumer: both SQL backends), the catalog's change log
// resumes it: one "updated" event per instance changed since (an instance
// the client did not know is an addition) or "removed" with the reason the
// log recorded, then "synced", then live changes. Otherwise it sends a new
// snapshot whose marker says "fresh":true: the client must replace what it
// had with it (the remote client diffs the two and reports the
// differences; a removal it cannot explain says "unknown"). A subscriber
// that falls behind the history while connected gets such a fresh
// snapshot in-stream.
//
// # Scale
//
// The server is stateless over its catalog: the database stays the one
// source of truth, so several servers share one PostgreSQL. Each server
// holds one Watch of the catalog (its mirror), shared by every SSE
// subscriber, which reads the shared history with its own cursor: no
// per-subscriber queue, bounded memory. Heartbeats from all clients are
// gathered for Options.HeartbeatWindow and renewed in one statement (one
// per 10,000 ids). A registration or deregistration is answered once the
// server's mirror shows it (at most 2 s), so a client that then watches
// through the same server finds its own write in the snapshot.
//
// # Reaping
//
// A default reap (POST /v1/reap without older_than, from a client's
// Bootstrap or the server's own reaper) deletes the rows stale for twice
// their TTL with the post-outage grace of switchboard.ReapGrace: a row only
// once the server has been reachable to the catalog (its mirror synced) for
// that row's TTL, and, given ?reachable_for=, the client too. No row is
// sent to the client, so 200 clients starting at once cost the server 40
// small requests a second, not 200 listings of the catalog. The answer
// says how often the server reaps by itself ("reaps_every", absent when
// its reaper is off); a remote client's Bootstrap then leaves reaping to
// the server for a minute at a time, and the 40 requests become about 3.
package httpapi
