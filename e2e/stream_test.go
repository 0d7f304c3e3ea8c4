package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// Test 1: a streamed answer equals the fake's deterministic text, with
// chunk sequence 1..N and no gap.
func TestStreamedAnswerIsExact(t *testing.T) {
	const tokens = 60
	sys := start(t, options{Mock: mockupstream.Config{Tokens: tokens, TokenInterval: time.Millisecond}})
	msgs, want := prompt("Tell me about durable streams.", tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s, err := openSSE(ctx, http.MethodPost, sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, true), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if id := s.resp.Header.Get("X-Relay-Stream-Id"); id == "" {
		t.Fatal("no X-Relay-Stream-Id header")
	}
	tr := &transcript{}
	must(t, tr.readUntil(s, 0))
	if got := tr.text.String(); got != want {
		t.Fatalf("text differs:\n got %q\nwant %q", got, want)
	}
	if tr.finish != "stop" || tr.status != "done" {
		t.Fatalf("finish %q status %q, want stop/done", tr.finish, tr.status)
	}
}

// Test 2: a client drops its connection at five random points and resumes
// each time, alternating between two edges; it ends with exactly the full
// text, checked by cursor (transcript.add) and by text.
func TestResumeAcrossEdgesAfterDrops(t *testing.T) {
	const tokens = 200
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond}})
	msgs, want := prompt("A long answer, please.", tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	drops := dropPoints(rng, 5, 20)
	t.Logf("dropping after events %v", drops)

	tr := &transcript{}
	s, err := openSSE(ctx, http.MethodPost, sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, true), "")
	if err != nil {
		t.Fatal(err)
	}
	id := s.resp.Header.Get("X-Relay-Stream-Id")
	for i := 0; ; i++ {
		stop := 0
		if len(drops) > 0 {
			stop = drops[0]
		}
		if err := tr.readUntil(s, stop); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		s.Close()
		if tr.done {
			break
		}
		drops = drops[1:]
		edge := sys.Edges[(i+1)%2]
		if s, err = openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+id, nil, tr.lastID); err != nil {
			t.Fatalf("resume %d on %s: %v", i+1, edge, err)
		}
	}
	if got := tr.text.String(); got != want {
		t.Fatalf("text differs:\n got %q\nwant %q", got, want)
	}
	if tr.status != "done" {
		t.Fatalf("status %q", tr.status)
	}
}

// dropPoints returns n distinct increasing event counts in [1, max].
func dropPoints(rng *rand.Rand, n, max int) []int {
	points := rng.Perm(max)[:n]
	for i := range points {
		points[i]++
	}
	slices.Sort(points)
	return points
}

// Test 3: resume after the stream finished, resume from the start, and the
// errors for an unknown stream and a foreign or malformed cursor.
func TestResumeFinishedStreamAndErrors(t *testing.T) {
	const tokens = 30
	sys := start(t, options{Mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	edge := sys.Edges[0]

	finish := func(text string) (string, *transcript, string) {
		msgs, want := prompt(text, tokens)
		s, err := openSSE(ctx, http.MethodPost, edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tr := &transcript{}
		must(t, tr.readUntil(s, 0))
		return s.resp.Header.Get("X-Relay-Stream-Id"), tr, want
	}
	id, first, want := finish("first")
	otherID, other, _ := finish("second")

	t.Run("from the start", func(t *testing.T) {
		s, err := openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+id, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tr := &transcript{}
		must(t, tr.readUntil(s, 0))
		if tr.text.String() != want || tr.status != "done" || tr.events != first.events {
			t.Fatalf("replay: %d events, status %q, text %q", tr.events, tr.status, tr.text.String())
		}
	})
	t.Run("after the middle, by query parameter", func(t *testing.T) {
		// Replay the first three events, then resume after the third.
		s, err := openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+id, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		tr := &transcript{}
		must(t, tr.readUntil(s, 3))
		s.Close()
		s, err = openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+id+"?last_event_id="+tr.lastID, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		must(t, tr.readUntil(s, 0))
		if tr.text.String() != want {
			t.Fatalf("text %q, want %q", tr.text.String(), want)
		}
	})
	t.Run("after the last event", func(t *testing.T) {
		s, err := openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+id, nil, first.lastID)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ev, err := s.Next()
		if err != nil || ev.Data != "[DONE]" {
			t.Fatalf("after the end: %+v, %v; want [DONE] only", ev, err)
		}
	})
	for _, tc := range []struct {
		name, path, cursor string
		status             int
		code               string
	}{
		{"unknown stream", "/v1/streams/s" + "aaaaaaaaaaaaaaaaaaaaaaaaaa", "", http.StatusNotFound, "stream_not_found"},
		{"malformed stream id", "/v1/streams/not-an-id", "", http.StatusBadRequest, ""},
		{"malformed cursor", "/v1/streams/" + id, "seven", http.StatusBadRequest, ""},
		{"foreign cursor", "/v1/streams/" + id, other.lastID, http.StatusBadRequest, "cursor_mismatch"},
		// The plain form older edges showed, naming the partition's first
		// frame: the other stream's claim, or another stream's.
		{"plain cursor of another frame", "/v1/streams/" + otherID, fmt.Sprintf("%d-1", other.lastSeq+5), http.StatusBadRequest, "cursor_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openSSE(ctx, http.MethodGet, edge+tc.path, nil, tc.cursor)
			var he *httpError
			if !errors.As(err, &he) || he.Status != tc.status {
				t.Fatalf("err = %v, want HTTP %d", err, tc.status)
			}
			var body struct {
				Error struct{ Message, Type, Code string }
			}
			if json.Unmarshal([]byte(he.Body), &body) != nil || body.Error.Message == "" {
				t.Fatalf("body is not an OpenAI error: %s", he.Body)
			}
			if tc.code != "" && body.Error.Code != tc.code {
				t.Fatalf("code %q, want %q (%s)", body.Error.Code, tc.code, he.Body)
			}
		})
	}
}

// Test 5: a non-streaming request gets one chat.completion assembled from
// the durable stream.
func TestNonStreamingRequest(t *testing.T) {
	const tokens = 25
	sys := start(t, options{Mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1}})
	msgs, want := prompt("non-streaming", tokens)
	resp, err := httpClient.Post(sys.Edges[0]+"/v1/chat/completions", "application/json", bytesReader(chatBody(t, msgs, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || out.Object != "chat.completion" || len(out.Choices) != 1 {
		t.Fatalf("status %d, %+v", resp.StatusCode, out)
	}
	c := out.Choices[0]
	if c.Message.Content != want || c.Message.Role != "assistant" || c.FinishReason != "stop" {
		t.Fatalf("choice %+v, want content %q", c, want)
	}
	if out.Usage.CompletionTokens != tokens {
		t.Fatalf("completion tokens %d, want %d", out.Usage.CompletionTokens, tokens)
	}
}

// Test 6: fifty concurrent streams, each correct.
func TestFiftyConcurrentStreams(t *testing.T) {
	const tokens, streams = 40, 50
	sys := start(t, options{Edges: 2, Workers: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			msgs, want := prompt(fmt.Sprintf("question %d", i), tokens)
			s, err := openSSE(ctx, http.MethodPost, sys.Edges[i%2]+"/v1/chat/completions", chatBody(t, msgs, true), "")
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			tr := &transcript{}
			if err := tr.readUntil(s, 0); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			if got := tr.text.String(); got != want || tr.status != "done" {
				errs <- fmt.Errorf("stream %d: status %q text %q, want %q", i, tr.status, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
