package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// received collects exported spans as "service/span name".
type received struct {
	mu    sync.Mutex
	spans []string
}

func (r *received) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		svc := ""
		for _, a := range rs.Resource.GetAttributes() {
			if a.Key == "service.name" {
				svc = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, svc+"/"+s.Name)
			}
		}
	}
}

func (r *received) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.spans...)
}

func resetGlobal(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
}

func emit(t *testing.T, tr *Tracing) {
	t.Helper()
	_, span := otel.Tracer("test").Start(context.Background(), "hello")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestOffWithoutEnvironment(t *testing.T) {
	resetGlobal(t)
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
	} {
		tr, err := Setup(context.Background(), "svc", Options{Getenv: func(k string) string { return env[k] }})
		if err != nil || tr.Exporting() != "" || tr.Provider() != nil {
			t.Fatalf("env %v: %+v %v; want tracing off", env, tr, err)
		}
		if _, span := otel.Tracer("x").Start(context.Background(), "s"); span.IsRecording() {
			t.Fatalf("env %v: the global provider records", env)
		}
	}
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		if _, err := Setup(context.Background(), "svc", Options{Getenv: func(k string) string { return env[k] }}); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Fatalf("env %v: %v; want an error", env, err)
		}
	}
}

func TestIDsWithoutExporter(t *testing.T) {
	resetGlobal(t)
	tr, err := Setup(context.Background(), "svc", Options{Getenv: func(string) string { return "" }, IDsWithoutExporter: true})
	if err != nil || tr.Exporting() != "" || tr.Provider() == nil {
		t.Fatalf("%+v %v", tr, err)
	}
	_, span := otel.Tracer("x").Start(context.Background(), "s")
	if !span.SpanContext().TraceID().IsValid() {
		t.Fatal("no trace id")
	}
	span.End()
	_ = tr.Shutdown(context.Background())
}

func TestExportOverOTLPHTTP(t *testing.T) {
	resetGlobal(t)
	var got received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		got.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tr, err := Setup(context.Background(), "svc", Options{})
	if err != nil || tr.Exporting() != "otlp/http" {
		t.Fatalf("%+v %v", tr, err)
	}
	emit(t, tr)
	if s := got.get(); len(s) != 1 || s[0] != "from-env/hello" {
		t.Fatalf("the collector received %v", s)
	}
}

type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	got *received
}

func (c collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.got.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestExportOverOTLPGRPC(t *testing.T) {
	resetGlobal(t)
	var got received
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, collector{got: &got})
	go gs.Serve(lis)
	defer gs.Stop()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	tr, err := Setup(context.Background(), "svc", Options{})
	if err != nil || tr.Exporting() != "otlp/grpc" {
		t.Fatalf("%+v %v", tr, err)
	}
	emit(t, tr)
	if s := got.get(); len(s) != 1 || s[0] != "svc/hello" {
		t.Fatalf("the collector received %v", s)
	}
}

// OTEL_TRACES_EXPORTER is a comma-separated list (OpenTelemetry
// specification): each supported exporter once, none alone; anything else
// is an error that names the offending entry.
func TestExporterList(t *testing.T) {
	resetGlobal(t)
	for _, tc := range []struct {
		value string
		want  string // in the error
	}{
		{"otlp,console", `exporter "console" is not supported`},
		{"console, otlp", `exporter "console" is not supported`},
		{"OTLP , Zipkin", `exporter "Zipkin" is not supported`},
		{"otlp,otlp", `exporter "otlp" is listed twice`},
		{"otlp, OTLP", `exporter "otlp" is listed twice`},
		{"none,otlp", "none turns export off and must stand alone"},
		{"otlp,none", "none turns export off and must stand alone"},
		{"otlp,", "empty entry"},
		{",", "empty entry"},
	} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": tc.value, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
		tr, err := Setup(context.Background(), "svc", Options{Getenv: func(k string) string { return env[k] }})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("OTEL_TRACES_EXPORTER=%q: %+v, %v; want an error with %q", tc.value, tr, err, tc.want)
		}
	}
	// A one-entry list, spaces and case aside, is the exporter itself.
	for _, v := range []string{" otlp ", "OTLP"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": v, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
		tr, err := Setup(context.Background(), "svc", Options{Getenv: func(k string) string { return env[k] }})
		if err != nil || tr.Exporting() != "otlp/http" {
			t.Fatalf("OTEL_TRACES_EXPORTER=%q: %+v %v; want otlp/http", v, tr, err)
		}
		_ = tr.Shutdown(context.Background())
	}
	for _, v := range []string{" none ", "NONE"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": v, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
		tr, err := Setup(context.Background(), "svc", Options{Getenv: func(k string) string { return env[k] }})
		if err != nil || tr.Exporting() != "" || tr.Provider() != nil {
			t.Fatalf("OTEL_TRACES_EXPORTER=%q: %+v %v; want tracing off", v, tr, err)
		}
	}
}
