package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// `relay probe URL` succeeds on a 2xx answer only, and says what it got.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := run([]string{"probe", srv.URL + "/healthz"}, &out, &out); err != nil {
		t.Fatalf("probe of a healthy listener: %v", err)
	}
	if err := run([]string{"probe", srv.URL + "/readyz"}, &out, &out); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("probe of a 503: %v", err)
	}
	if err := run([]string{"probe"}, &out, &out); err == nil {
		t.Fatal("probe without a URL succeeded")
	}
}
