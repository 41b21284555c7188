package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3 document of the API (openapi.json), served at
// GET /v1/openapi.json without a token. The package's tests validate every
// request they send and every answer they get against it.
//
//go:embed openapi.json
var OpenAPI []byte

// handleOpenAPI serves the document.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(OpenAPI)
	}
	return nil
}
