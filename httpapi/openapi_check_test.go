package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	gopath "path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/switchboard-io/switchboard/httpapi"
)

// The API's OpenAPI document, loaded once for every test.
var spec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadSpec loads and validates httpapi.OpenAPI and builds its router.
func loadSpec() (*openapi3.T, routers.Router, error) {
	spec.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(httpapi.OpenAPI)
		if err != nil {
			spec.err = fmt.Errorf("loading openapi.json: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			spec.err = fmt.Errorf("openapi.json is not a valid OpenAPI 3 document: %w", err)
			return
		}
		r, err := legacy.NewRouter(doc)
		if err != nil {
			spec.err = fmt.Errorf("routing openapi.json: %w", err)
			return
		}
		spec.doc, spec.router = doc, r
	})
	return spec.doc, spec.router, spec.err
}

// maxChecked is the most of a response body the checker keeps; a larger
// one has its status and headers checked, not its body.
const maxChecked = 16 << 20

// checker validates every exchange a handler serves against the OpenAPI
// document: a request the document refuses must be refused by the server
// (4xx), and every response must be one the document describes (status,
// headers, body; of an event stream, status and headers). What it finds
// fails the test at cleanup, once the handlers it watches have returned.
type checker struct {
	mu       sync.Mutex
	problems []string
	active   sync.WaitGroup
}

// validated wraps h so that every exchange is validated against the
// document; a mismatch fails t. Register it before whatever stops the
// server, so its cleanup runs after the server has stopped.
func validated(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	if _, _, err := loadSpec(); err != nil {
		t.Fatal(err)
	}
	c := &checker{}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { c.active.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("openapi check: handlers still running 10 s after the test; their exchanges are not checked")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.problems {
			t.Errorf("openapi check: %s", p)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.active.Add(1)
		defer c.active.Done()
		vr := r.Clone(context.Background())
		body := &teeBody{}
		if r.Body != nil && r.Body != http.NoBody {
			body.rc = r.Body
			r.Body = body
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if err := c.check(vr, body, rec); err != nil {
			c.mu.Lock()
			c.problems = append(c.problems, fmt.Sprintf("%s %s → %d: %v", r.Method, r.URL.RequestURI(), rec.status, err))
			c.mu.Unlock()
		}
	})
}

// apiPath reports whether path belongs to the API (the rest is the
// dashboard's, Options.UI).
func apiPath(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || path == "/healthz" || path == "/metrics"
}

func (c *checker) check(r *http.Request, body *teeBody, rec *recorder) error {
	if !apiPath(r.URL.Path) {
		return nil
	}
	doc, router, _ := loadSpec()
	head := r.Method == http.MethodHead
	if head {
		r.Method = http.MethodGet // every GET answers HEAD with its headers
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	route, pathParams, err := router.FindRoute(r)
	if err == nil && !sameShape(r.URL.Path, route.Path, pathParams) {
		err = &routers.RouteError{Reason: "no route (the document's router is looser than the server's)"}
	}
	if err != nil {
		// Only the answers to a path or method the API does not have: 404
		// or 405 with Allow (403 when refused before routing), each with
		// the error body.
		var re *routers.RouteError
		if !errors.As(err, &re) {
			return err
		}
		switch {
		case unclean(r.URL.Path) && (status == http.StatusMovedPermanently || status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect):
			if rec.Header().Get("Location") == "" {
				return fmt.Errorf("redirect %d without Location", status)
			}
			return nil // to the clean path, as the document says
		case status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "":
			return errors.New("405 without Allow")
		case status != http.StatusNotFound && status != http.StatusMethodNotAllowed && status != http.StatusForbidden:
			return fmt.Errorf("a path or method the document does not have (%v) was answered %d", err, status)
		}
		return validErrorBody(doc, rec)
	}
	if ct := r.Header.Get("Content-Type"); ct == "" && len(body.buf.Bytes()) > 0 {
		// A program may send its JSON body without a Content-Type.
		r.Header.Set("Content-Type", "application/json")
	}
	r.Body = io.NopCloser(bytes.NewReader(body.buf.Bytes()))
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
			ExcludeRequestBody:  !body.eof && body.rc != nil, // not read whole by the server (too large, too slow)
			SkipSettingDefaults: true,
			MultiError:          true,
		},
	}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr == nil {
		reqErr = undeclaredQuery(r, route)
	}
	if reqErr != nil && status < 400 {
		return fmt.Errorf("the document refuses this request (%v), the server answered %d", reqErr, status)
	}
	ct, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			ExcludeResponseBody:   head || ct == "text/event-stream" || rec.truncated,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("response not as documented: %w", err)
	}
	return undeclaredHeaders(route, status, rec.Header())
}

// apiHeaders are the response headers of the API's own that the document
// must declare where they are sent.
var apiHeaders = []string{"Retry-After", httpapi.LeaseNextHeader, "WWW-Authenticate", httpapi.SecretHeader}

// undeclaredHeaders refuses an API header that the response sent but the
// document does not declare for it (the validator checks only the
// declared ones).
func undeclaredHeaders(route *routers.Route, status int, h http.Header) error {
	resp := route.Operation.Responses.Status(status)
	for _, name := range apiHeaders {
		if h.Get(name) == "" {
			continue
		}
		if resp == nil || resp.Value == nil || resp.Value.Headers[name] == nil {
			return fmt.Errorf("response header %s is not in the document for %d", name, status)
		}
	}
	return nil
}

// checkEvent validates the data of one watch event against the
// document's WatchEvent schema, and that its event field is the event's
// name.
func checkEvent(name, data string) error {
	doc, _, err := loadSpec()
	if err != nil {
		return err
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return fmt.Errorf("event %s: data is not a JSON object: %w", name, err)
	}
	if v["event"] != name {
		return fmt.Errorf("event %s: data says event %v", name, v["event"])
	}
	if err := doc.Components.Schemas["WatchEvent"].Value.VisitJSON(map[string]any(v)); err != nil {
		return fmt.Errorf("event %s: data not as documented: %w", name, err)
	}
	return nil
}

// unclean reports whether the server redirects path to its clean form
// (// or a . or .. segment in it).
func unclean(p string) bool {
	c := gopath.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c != p
}

// sameShape reports whether the server routes path as the document's
// template: the document's router also matches a trailing slash the
// template lacks, and an empty path parameter, which the server's routes
// do not.
func sameShape(path, template string, params map[string]string) bool {
	if strings.HasSuffix(path, "/") != strings.HasSuffix(template, "/") {
		return false
	}
	for _, v := range params {
		if v == "" {
			return false
		}
	}
	return true
}

// undeclaredQuery refuses a query parameter the operation does not
// declare: the server refuses them too, and one it took silently would be
// undocumented.
func undeclaredQuery(r *http.Request, route *routers.Route) error {
	var names []string
	for _, p := range append(slices.Clone(route.PathItem.Parameters), route.Operation.Parameters...) {
		if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
			names = append(names, p.Value.Name)
		}
	}
	for k := range r.URL.Query() {
		if !slices.Contains(names, k) {
			return fmt.Errorf("query parameter %q is not in the document", k)
		}
	}
	return nil
}

// validErrorBody checks a JSON error body against the Error schema.
func validErrorBody(doc *openapi3.T, rec *recorder) error {
	if ct, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type")); ct != "application/json" {
		return fmt.Errorf("error answered as %q, not application/json", ct)
	}
	if rec.truncated {
		return nil
	}
	var v any
	if err := json.Unmarshal(rec.body.Bytes(), &v); err != nil {
		return fmt.Errorf("error body: %w", err)
	}
	return doc.Components.Schemas["Error"].Value.VisitJSON(v)
}

// teeBody keeps what the server reads of a request body, and whether it
// read all of it.
type teeBody struct {
	rc  io.ReadCloser
	buf bytes.Buffer
	eof bool
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *teeBody) Close() error { return b.rc.Close() }

// recorder passes a response through and keeps its status and (but of an
// event stream) its body.
type recorder struct {
	http.ResponseWriter
	status    int
	body      bytes.Buffer
	truncated bool
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.truncated && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		if w.body.Len()+len(b) > maxChecked {
			w.truncated = true
		} else {
			w.body.Write(b)
		}
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) through the recorder.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
