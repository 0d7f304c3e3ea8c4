package provider

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestRequestHeadersFor(t *testing.T) {
	ids := CallIDs{StreamID: "s1", RequestID: "req-7", Tenant: "acme"}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		ids     CallIDs
		want    http.Header
	}{
		{"defaults", nil, ids, http.Header{"X-Relay-Stream-Id": {"s1"}, "X-Request-Id": {"req-7"}}},
		{"no client id: the stream's", nil, CallIDs{StreamID: "s1"}, http.Header{"X-Relay-Stream-Id": {"s1"}, "X-Request-Id": {"s1"}}},
		{"configured", map[string]string{"x-correlation-id": "relay-{request_id}", "X-Tenant": "{tenant}", "X-Request-Id": ""}, ids,
			http.Header{"X-Correlation-Id": {"relay-req-7"}, "X-Tenant": {"acme"}}},
		{"empty after substitution", map[string]string{"X-Tenant": "{tenant}"}, CallIDs{StreamID: "s1"}, http.Header{}},
		{"a client's id cannot add parameters", map[string]string{"X-Combo": "s={stream_id};t={tenant};r={request_id}"},
			CallIDs{StreamID: "s1", RequestID: "x;s=forged-stream;t=alpha", Tenant: "beta"},
			http.Header{"X-Combo": {"s=s1;t=beta;r=x%3Bs%3Dforged-stream%3Bt%3Dalpha"}}},
		{"nor a byte outside ASCII", nil, CallIDs{StreamID: "s1", RequestID: "é 1"},
			http.Header{"X-Relay-Stream-Id": {"s1"}, "X-Request-Id": {"%C3%A9%201"}}},
	} {
		c := Config{RequestHeaders: tc.headers}
		if got := c.RequestHeadersFor(tc.ids); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRequestHeadersValidation(t *testing.T) {
	for headers, want := range map[string]string{
		"Authorization": "set by the relay",
		"x-api-key":     "set by the relay",
		"Content-Type":  "set by the relay",
		"Bad Name":      "not a header name",
		"X-Line":        "line break",
	} {
		value := "v"
		if headers == "X-Line" {
			value = "a\r\nInjected: yes"
		}
		c := Config{Name: "p", BaseURL: "http://p/v1", Models: []string{"m"}, RequestHeaders: map[string]string{headers: value}}
		if err := c.Validate("providers[0]"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("request_headers %q: %v, want an error saying %q", headers, err, want)
		}
	}
}
