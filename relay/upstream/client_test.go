package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/relaydev/relay/relay/dialect/chat"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestStreamRequest(t *testing.T) {
	type seen struct {
		method, path, auth, accept, ctype string
		body                              []byte
	}
	got := make(chan seen, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Content-Type"), b}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	body := []byte(`{"model":"m","stream":true,"messages":[]}`)
	var c Client
	s, err := c.Stream(t.Context(), Target{Provider: "p", BaseURL: srv.URL + "/v1/", APIKey: "sk-test"}, body)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := <-got
	want := seen{"POST", "/v1/chat/completions", "Bearer sk-test", "text/event-stream", "application/json", body}
	if r.method != want.method || r.path != want.path || r.auth != want.auth || r.accept != want.accept || r.ctype != want.ctype || !bytes.Equal(r.body, want.body) {
		t.Fatalf("request = %+v, want %+v", r, want)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
}

func TestStreamWithoutAPIKey(t *testing.T) {
	auth := make(chan []string, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Values("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
	})
	s, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: srv.URL}, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a := <-auth; len(a) != 0 {
		t.Fatalf("Authorization = %q, want none", a)
	}
}

func TestStatusError(t *testing.T) {
	date := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		headers map[string]string
		body    string
		retry   time.Duration
		oe      chat.Error
	}{
		{
			name:    "429 with seconds and ms",
			status:  429,
			headers: map[string]string{"Retry-After": "2", "retry-after-ms": "2500"},
			body:    `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			retry:   2500 * time.Millisecond,
			oe:      chat.Error{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"},
		},
		{
			name:    "503 with HTTP date",
			status:  503,
			headers: map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": date.Add(30 * time.Second).Format(http.TimeFormat)},
			body:    `<html>unavailable</html>`,
			retry:   30 * time.Second,
		},
		{
			name:   "401 OpenAI shape",
			status: 401,
			body:   `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			oe:     chat.Error{Message: "Incorrect API key provided", Type: "invalid_request_error", Code: "invalid_api_key"},
		},
		{
			name:   "400 vLLM shape",
			status: 400,
			body:   `{"object":"error","message":"maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":400}`,
			oe:     chat.Error{Message: "maximum context length is 4096 tokens", Type: "BadRequestError", Code: "400"},
		},
		{name: "404 empty body", status: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := NewClient(nil).Stream(t.Context(), Target{Provider: "p", BaseURL: srv.URL}, []byte(`{}`))
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Stream = %v, want *StatusError", err)
			}
			if se.Provider != "p" || se.Status != tc.status || string(se.Body) != tc.body || se.RetryAfter != tc.retry || se.Err != tc.oe {
				t.Fatalf("StatusError = %+v\nwant status %d body %q retry %v err %+v", se, tc.status, tc.body, tc.retry, tc.oe)
			}
			if prefix := fmt.Sprintf("upstream: p: status %d: ", tc.status); !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("Error() = %q, want prefix %q", err, prefix)
			}
		})
	}
}

func TestStatusErrorBodyIsBounded(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("x", 3*maxErrorBody))
	})
	_, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: srv.URL}, []byte(`{}`))
	var se *StatusError
	if !errors.As(err, &se) || len(se.Body) != maxErrorBody {
		t.Fatalf("Stream = %v, want *StatusError with a %d-byte body", err, maxErrorBody)
	}
}

// Some providers answer a streaming request with a 200 JSON error.
func TestStreamJSONInsteadOfEvents(t *testing.T) {
	tests := []struct {
		name, body string
		isOpenAI   bool
	}{
		{name: "error payload", body: `{"error":{"message":"model overloaded","type":"server_error"}}`, isOpenAI: true},
		{name: "completion", body: `{"object":"chat.completion","choices":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: srv.URL}, []byte(`{}`))
			var oe *chat.Error
			if errors.As(err, &oe) != tc.isOpenAI || errors.Is(err, ErrMalformed) == tc.isOpenAI {
				t.Fatalf("Stream = %v; want provider error: %v", err, tc.isOpenAI)
			}
		})
	}
}

func TestStreamBadURL(t *testing.T) {
	_, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: "://nope"}, nil)
	if err == nil {
		t.Fatal("Stream with a bad URL succeeded")
	}
}
