package upstream

import (
	"context"
	"errors"
	"github.com/relaydev/relay/relay/dialect/chat"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestPostReturnsTheBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "wrong request", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[]}`)
	})
	var c Client
	resp, err := c.Post(context.Background(), Target{Provider: "p", BaseURL: srv.URL + "/v1/", APIKey: "k"}, "/embeddings", []byte(`{}`), false)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	b, err := resp.ReadAll(1 << 10)
	if err != nil || string(b) != `{"data":[]}` || resp.Status != http.StatusOK || resp.ContentType != "application/json" {
		t.Fatalf("body %q, status %d, type %q, err %v", b, resp.Status, resp.ContentType, err)
	}
}

func TestPostBoundsTheBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "0123456789") })
	var c Client
	resp, err := c.Post(context.Background(), Target{Provider: "p", BaseURL: srv.URL}, "/x", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if _, err := resp.ReadAll(9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadAll(9) of 10 bytes: %v, want ErrTooLarge", err)
	}
}

func TestPostStatusError(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"slow down","type":"requests"}}`)
	})
	var c Client
	_, err := c.Post(context.Background(), Target{Provider: "p", BaseURL: srv.URL}, "/completions", nil, false)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests || se.RetryAfter != 3*time.Second || se.Err.Message != "slow down" {
		t.Fatalf("err %v, want a 429 StatusError with its Retry-After", err)
	}
	if Classify(err) != Transient {
		t.Fatalf("class %v", Classify(err))
	}
}

func TestPostEvents(t *testing.T) {
	for _, c := range []struct {
		name   string
		pieces []string
		events int
		end    func(error) bool
	}{
		{"done", []string{": hi\n\n", "data: {\"a\":1}\n\n", "data: {\"a\":2}\n\ndata: [DONE]\n\n"}, 2, func(err error) bool { return errors.Is(err, io.EOF) }},
		{"truncated", []string{"data: {\"a\":1}\n\n"}, 1, func(err error) bool { return errors.Is(err, ErrTruncated) }},
		{"error payload", []string{"data: {\"a\":1}\n\n", "data: {\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\"}}\n\n"}, 1,
			func(err error) bool { oe := (*chat.Error)(nil); return errors.As(err, &oe) && oe.Message == "bad" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := sseServer(t, c.pieces...)
			var cl Client
			resp, err := cl.Post(context.Background(), Target{Provider: "p", BaseURL: srv.URL}, "/completions", nil, true)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Close()
			n := 0
			for {
				_, err := resp.NextEvent()
				if err != nil {
					if n != c.events || !c.end(err) {
						t.Fatalf("%d events, then %v", n, err)
					}
					return
				}
				n++
			}
		})
	}
}

func TestPostStreamAnsweredWithJSON(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"error":{"message":"nope","type":"invalid_request_error"}}`)
	})
	var c Client
	_, err := c.Post(context.Background(), Target{Provider: "p", BaseURL: srv.URL}, "/completions", nil, true)
	if oe := (*chat.Error)(nil); !errors.As(err, &oe) || oe.Message != "nope" {
		t.Fatalf("err %v, want the provider's error", err)
	}
}
