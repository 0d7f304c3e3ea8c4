// Package tracing sets up OpenTelemetry tracing for a relay process and
// carries a request's trace across the hops it crosses (relay/README.md "Tracing"):
//
//	client ──HTTP──▶ edge span ──JetStream request header "traceparent"──▶
//	    worker job span (one per delivery: a takeover is a second one)
//	        ├─ claim span
//	        └─ attempt span per upstream call ──HTTP header "traceparent"──▶ provider
//	    end frame ("traceparent" of the job span that ended the stream)
//	        ──▶ an edge serving a resume links its span to the trace
//
// Tracing is off unless an OTLP/HTTP endpoint is configured: the roles
// then get a no-op TracerProvider, and the propagation helpers still carry
// whatever trace context a request came with. Roles take a
// trace.TracerProvider in their Deps and use this package's helpers in
// a few hooks only; nothing here is global but the OpenTelemetry error
// handler, pointed at the process's logger.
package tracing
