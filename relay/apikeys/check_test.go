package apikeys

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
)

func TestCheckAgainstTheFakeProvider(t *testing.T) {
	mock, err := mockupstream.New(mockupstream.Config{APIKeys: []string{"good"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(mock.Handler())
	t.Cleanup(ts.Close)
	for _, typ := range []provider.Type{provider.TypeOpenAI, provider.TypeOpenAIResponses, provider.TypeAnthropic} {
		p := provider.Config{Name: "mock", Type: typ, BaseURL: ts.URL + "/v1"}
		if res := Check(t.Context(), ts.Client(), p, "good"); res.State != Verified {
			t.Errorf("%s: good key: %+v, want verified", typ, res)
		}
		res := Check(t.Context(), ts.Client(), p, "bad")
		if res.State != Failed || res.Reason != "refused: HTTP 401 Unauthorized" {
			t.Errorf("%s: bad key: %+v, want failed, refused with 401", typ, res)
		}
	}
}

func TestCheckTellsOutagesFromRefusals(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   State
	}{
		{http.StatusOK, Verified},
		{http.StatusForbidden, Failed},
		{http.StatusTooManyRequests, Pending},
		{http.StatusServiceUnavailable, Pending},
		{http.StatusNotFound, Unchecked},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/models" || r.Header.Get("Authorization") != "Bearer k" {
				t.Errorf("request %s with %q", r.URL.Path, r.Header.Get("Authorization"))
			}
			w.WriteHeader(tc.status)
		}))
		res := Check(t.Context(), ts.Client(), provider.Config{Name: "p", BaseURL: ts.URL + "/api"}, "k")
		ts.Close()
		if res.State != tc.want {
			t.Errorf("HTTP %d: %+v, want %s", tc.status, res, tc.want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if res := Check(t.Context(), http.DefaultClient, provider.Config{Name: "p", BaseURL: "http://" + addr}, "k"); res.State != Pending {
		t.Errorf("provider down: %+v, want pending", res)
	}
}
