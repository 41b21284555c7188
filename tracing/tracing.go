// Package tracing turns on OpenTelemetry trace export for a Switchboard
// process from the standard OTEL_* environment variables, and leaves it off
// otherwise.
//
// The router, the gRPC wire (otelgrpc) and the NATS wire always propagate
// W3C trace context; whether spans are recorded and exported is decided
// here, once per process: Setup installs an SDK tracer provider with an
// OTLP exporter as the global provider only when the environment asks for
// one. Without it the global provider stays a no-op and tracing costs
// close to nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure Setup.
type Options struct {
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// IDsWithoutExporter installs a provider that records spans and
	// propagates real trace ids even when no exporter is configured (for
	// `send --verbose`, which prints the trace id). Nothing is exported
	// unless the environment configures an exporter.
	IDsWithoutExporter bool
}

// Tracing is the outcome of Setup.
type Tracing struct {
	tp       *sdktrace.TracerProvider // nil: tracing off
	exporter string                   // "otlp/grpc", "otlp/http", or ""
}

// Setup reads the OpenTelemetry environment and, when it configures an
// exporter, installs a tracer provider exporting over OTLP as the global
// provider (and W3C trace context as the global propagator). Exporting is
// on when OTEL_TRACES_EXPORTER names "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turn it off.
// OTEL_TRACES_EXPORTER is a comma-separated list, as the OpenTelemetry
// specification allows (case and spaces around entries do not matter): each
// supported exporter (otlp is the only one) may be listed once, and none
// must stand alone; an empty, unknown or repeated entry is an error that
// names it. The
// protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", or "http/protobuf" (the default).
// The exporters read the other OTEL_EXPORTER_OTLP_* variables (endpoint,
// headers, TLS, timeout) themselves; the sampler follows OTEL_TRACES_SAMPLER
// and the resource OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, with
// service.name defaulting to service.
//
// Call Shutdown before the process exits, to flush the last spans.
func Setup(ctx context.Context, service string, opts Options) (*Tracing, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	on := false
	if raw := env("OTEL_TRACES_EXPORTER"); raw == "" {
		on = env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	} else {
		names, err := parseExporters(raw)
		if err != nil {
			return nil, err
		}
		on = slices.Contains(names, "otlp")
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		on = false
	}
	if !on && !opts.IDsWithoutExporter {
		return &Tracing{}, nil
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", service)),
		mustResource(resource.New(ctx, resource.WithFromEnv())),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	t := &Tracing{}
	if on {
		proto := strings.ToLower(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		if proto == "" {
			proto = strings.ToLower(env("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		var exp sdktrace.SpanExporter
		switch proto {
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
			t.exporter = "otlp/grpc"
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
			t.exporter = "otlp/http"
		default:
			return nil, fmt.Errorf("tracing: OTLP protocol %q is not supported; use grpc or http/protobuf", proto)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing: %s exporter: %w", t.exporter, err)
		}
		popts = append(popts, sdktrace.WithBatcher(exp))
	}
	t.tp = sdktrace.NewTracerProvider(popts...)
	otel.SetTracerProvider(t.tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

// supportedExporters are the OTEL_TRACES_EXPORTER entries Setup can
// install, besides "none".
var supportedExporters = []string{"otlp"}

// parseExporters reads OTEL_TRACES_EXPORTER (not empty): a comma-separated
// list of exporter names, each supported one at most once, or "none" alone.
// It returns the exporters to install (none for "none"), lower-cased.
func parseExporters(raw string) ([]string, error) {
	entries := strings.Split(raw, ",")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		name := strings.ToLower(strings.TrimSpace(e))
		switch {
		case name == "":
			return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q has an empty entry; want a comma-separated list of %s, or none", raw, strings.Join(supportedExporters, ", "))
		case name == "none":
			if len(entries) > 1 {
				return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: none turns export off and must stand alone", raw)
			}
			return nil, nil
		case !slices.Contains(supportedExporters, name):
			return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: exporter %q is not supported; use %s (comma-separated), or none", raw, strings.TrimSpace(e), strings.Join(supportedExporters, ", "))
		case slices.Contains(names, name):
			return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: exporter %q is listed twice; name each exporter once", raw, name)
		}
		names = append(names, name)
	}
	return names, nil
}

// mustResource drops a partial-resource error from the environment
// detector (a malformed OTEL_RESOURCE_ATTRIBUTES entry), keeping what it
// could read.
func mustResource(r *resource.Resource, err error) *resource.Resource {
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return resource.Empty()
	}
	return r
}

// Exporting reports whether spans are exported, and how ("otlp/grpc",
// "otlp/http"); "" when not.
func (t *Tracing) Exporting() string { return t.exporter }

// Provider returns the installed provider, or nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t.tp == nil {
		return nil
	}
	return t.tp
}

// Shutdown flushes and stops the provider (nothing when tracing is off).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
