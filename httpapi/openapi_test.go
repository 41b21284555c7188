package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/httpapi"
)

// TestOpenAPIDocument: the embedded document is a valid OpenAPI 3 document
// (loadSpec validates it), its closed schemas refuse what they do not
// describe, and its error codes are the server's.
func TestOpenAPIDocument(t *testing.T) {
	doc, _, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q; want 3.x", doc.OpenAPI)
	}
	inst := doc.Components.Schemas["Instance"].Value
	good := map[string]any{"id": "a", "name": "a", "type": "t", "address": "h:1", "capabilities": []any{}, "version": "",
		"metadata": map[string]any{}, "ttl": "10s", "registered_at": "", "last_seen": "", "stale": false}
	if err := inst.VisitJSON(good); err != nil {
		t.Fatalf("an instance as the server writes it is refused: %v", err)
	}
	bad := map[string]any{}
	for k, v := range good {
		bad[k] = v
	}
	bad["secret"] = "x"
	if err := inst.VisitJSON(bad); err == nil {
		t.Fatal("an instance with an undocumented field is accepted")
	}
	var codes []string
	for _, c := range doc.Components.Schemas["Error"].Value.Properties["code"].Value.Enum {
		codes = append(codes, c.(string))
	}
	for _, c := range []string{httpapi.CodeInvalid, httpapi.CodeInvalidName, httpapi.CodeInvalidAddress, httpapi.CodeTooLarge,
		httpapi.CodeUnauthorized, httpapi.CodeForbidden, httpapi.CodeNotFound, httpapi.CodeLeaseHeld, httpapi.CodeLeaseLost,
		httpapi.CodeUnavailable, httpapi.CodeMethod, httpapi.CodeNoCatalog, httpapi.CodeBusy, httpapi.CodeUnsupportedMedia,
		httpapi.CodeTooMany} {
		if !slices.Contains(codes, c) {
			t.Errorf("error code %q is not in the document", c)
		}
	}
	for _, h := range []string{httpapi.SecretHeader, httpapi.LeaseSecretHeader, httpapi.LeaseNextHeader, "Retry-After"} {
		if !bytes.Contains(httpapi.OpenAPI, []byte(`"`+h+`"`)) {
			t.Errorf("header %s is not in the document", h)
		}
	}
}

// TestOpenAPIServed: GET /v1/openapi.json answers the document without a
// token, on a server that has one; other methods get 405.
func TestOpenAPIServed(t *testing.T) {
	s := start(t, httpapi.Options{Token: "client-token", AdminToken: "admin-token"})
	code, b := call(t, "GET", s.url+"/v1/openapi.json", nil)
	if code != 200 || !bytes.Equal(b, httpapi.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json without a token: %d, %d bytes; want 200 and the document (%d bytes)", code, len(b), len(httpapi.OpenAPI))
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil || doc["openapi"] == nil {
		t.Fatalf("served document: %v", err)
	}
	resp := request(t, "HEAD", s.url+"/v1/openapi.json", nil)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	code, b = call(t, "POST", s.url+"/v1/openapi.json", nil, "Authorization", "Bearer client-token")
	expectError(t, code, b, http.StatusMethodNotAllowed, httpapi.CodeMethod, "")
}

// TestOpenAPIRoutesExist: every path and method of the document is a route
// of the server: none is answered with the 404 of an unknown endpoint or
// a 405. (A route the document lacks fails the tests that use it: see
// validated.)
func TestOpenAPIRoutesExist(t *testing.T) {
	doc, _, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, httpapi.Options{ReapInterval: -1})
	n := 0
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if path == "/v1/watch" {
				method = "HEAD" // the headers alone, not a stream
			}
			u := s.url + strings.ReplaceAll(path, "{id}", "no-such-id")
			code, b := call(t, method, u, nil)
			var e httpapi.ErrorBody
			json.Unmarshal(b, &e)
			if code == http.StatusMethodNotAllowed || strings.HasPrefix(e.Error, "no such endpoint") {
				t.Errorf("%s %s: %d %s; the document has it, the server does not", method, path, code, b)
			}
			n++
		}
	}
	if n < 17 {
		t.Fatalf("the document has %d operations; want every one of the server's 17", n)
	}
}
