package provider

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// Every call to a provider says which request it serves, so that a
// provider's logs and a support ticket can be matched with the relay's:
// by default X-Relay-Stream-Id (the stream, the same across the retries,
// continuations and takeovers of one answer) and X-Request-Id (the
// client's own X-Request-Id, or the stream id when it sent none). A
// provider's request_headers replaces the defaults; its values may name
// {stream_id}, {request_id} and {tenant}, and a header whose value comes
// out empty is not sent, so "" turns a default off. The client's request
// id is percent-encoded where it holds anything but letters, digits and
// "-._~" (escapeClientValue): it is the only value a client chooses.
//
// The client's Idempotency-Key is not among them: the calls of one answer
// differ (a continuation asks for the rest), and a provider that
// deduplicated by the key would answer them all with the first.

// DefaultRequestHeaders are sent when a provider sets no request_headers.
var DefaultRequestHeaders = map[string]string{
	"X-Relay-Stream-Id": "{stream_id}",
	"X-Request-Id":      "{request_id}",
}

// CallIDs are what request_headers may name.
type CallIDs struct {
	// StreamID is the relay's stream.
	StreamID string
	// RequestID is the client's X-Request-Id; empty: StreamID stands in.
	RequestID string
	// Tenant is the tenant of the request's key; empty when anonymous.
	Tenant string
}

// reservedHeaders carry the call itself or its credentials: no
// request_headers may set them.
var reservedHeaders = []string{"Authorization", "X-Api-Key", "Anthropic-Version", "Content-Type", "Content-Length", "Accept", "Host", "Traceparent", "Tracestate"}

// RequestHeadersFor returns the headers of a call for ids.
func (c Config) RequestHeadersFor(ids CallIDs) http.Header {
	tmpl := c.RequestHeaders
	if tmpl == nil {
		tmpl = DefaultRequestHeaders
	}
	if ids.RequestID == "" {
		ids.RequestID = ids.StreamID
	}
	ids.RequestID = escapeClientValue(ids.RequestID)
	r := strings.NewReplacer("{stream_id}", ids.StreamID, "{request_id}", ids.RequestID, "{tenant}", ids.Tenant)
	h := make(http.Header, len(tmpl))
	for name, value := range tmpl {
		if v := r.Replace(value); v != "" {
			h.Set(name, v)
		}
	}
	return h
}

// escapeClientValue percent-encodes every byte of a value a client chose
// that is not unreserved in a URI (letters, digits, "-._~"), so that it
// cannot add separators or parameters to a templated header
// ("s={stream_id};r={request_id}" with a request id of ";s=other"). The
// ids clients send (UUIDs, "req_..." names) pass unchanged.
func escapeClientValue(v string) string {
	unreserved := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case unreserved(c):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// validateRequestHeaders names the first invalid request_headers entry.
func validateRequestHeaders(prefix string, headers map[string]string) error {
	for name, value := range headers {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }):
			return fmt.Errorf("%s.request_headers: %q is not a header name", prefix, name)
		case strings.ContainsAny(value, "\r\n"):
			return fmt.Errorf("%s.request_headers.%s: a value may not hold a line break", prefix, name)
		}
		for _, r := range reservedHeaders {
			if canon == r {
				return fmt.Errorf("%s.request_headers: %s is set by the relay itself", prefix, name)
			}
		}
	}
	return nil
}
