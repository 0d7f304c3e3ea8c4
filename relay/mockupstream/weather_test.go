package mockupstream

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The weather draws a fault for each request without a directive: with a
// share of 1 every call gets it. It changes at runtime through PUT
// /mock/weather, a request with its own directive is left to it, and the
// stats count what was drawn.
func TestWeatherDrawsFaultsPerCall(t *testing.T) {
	s, ts := newTestServer(t, Config{Tokens: 6, TokenInterval: -1, Weather: Weather{Cut: 1}})
	for i := range 3 {
		r := stream(t, ts, chatBody(true, conv("Cloudy.")))
		if r.err == nil || r.done || len(r.content()) == 0 || len(r.content()) >= 6 {
			t.Fatalf("call %d under cut weather: err %v, done %v, %d tokens; want a cut mid-answer", i, r.err, r.done, len(r.content()))
		}
	}
	if r := stream(t, ts, chatBody(true, conv("[[mock: status=500]] Own fault."))); r.status != http.StatusInternalServerError {
		t.Fatalf("a directive under weather: status %d, want its own 500", r.status)
	}

	put := func(body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, ts.URL+"/mock/weather", bytes.NewReader([]byte(body)))
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := put(`{"rate_limited":1,"retry_after":"2s"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /mock/weather: %d", resp.StatusCode)
	}
	r := stream(t, ts, chatBody(true, conv("Rate limited.")))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Fatalf("under a 429 storm: %d with Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	if resp := put(`{"stall":1,"stall_for":"150ms"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /mock/weather: %d", resp.StatusCode)
	}
	start := time.Now()
	if r := stream(t, ts, chatBody(true, conv("Stalls."))); !r.done || len(r.content()) != 6 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("a stall of 150ms: done %v, %d tokens after %v; want the whole answer after the stall", r.done, len(r.content()), time.Since(start))
	}
	for _, bad := range []string{`{"cut":1.5}`, `{"cut":0.6,"stall":0.6}`, `{"hail":1}`, `{"retry_after":"soon"}`} {
		if resp := put(bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT %s: %d, want 400", bad, resp.StatusCode)
		}
	}
	if resp := put(`{}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT {}: %d", resp.StatusCode)
	}
	if r := stream(t, ts, chatBody(true, conv("Fair."))); !r.done || r.err != nil {
		t.Fatalf("fair weather: done %v, err %v", r.done, r.err)
	}
	if w := s.Stats().Weather; w["cut"] != 3 || w["rate_limited"] != 1 || w["stall"] != 1 {
		t.Fatalf("weather drawn %v, want 3 cuts, 1 rate limit, 1 stall", w)
	}
}

// Shares out of range, or adding up past 1, are refused by name.
func TestWeatherValidate(t *testing.T) {
	for _, tc := range []struct {
		w    Weather
		want string
	}{
		{Weather{Cut: -0.1}, "weather.cut"},
		{Weather{Stall: 2}, "weather.stall"},
		{Weather{Cut: 0.5, Stall: 0.3, RateLimited: 0.3}, "add up"},
		{Weather{StallFor: -time.Second}, "weather.stall_for"},
	} {
		if err := (Config{Weather: tc.w}).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.w, err, tc.want)
		}
	}
}
