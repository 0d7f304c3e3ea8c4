package mockupstream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestFirstTokenAfterWaitsAfterTheRoleChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(fullSpeed(3), nil)
		if err != nil {
			t.Fatal(err)
		}
		rec, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(true, conv("[[mock: first_token_after=2s]]"))))
		time.Sleep(2*time.Second - time.Nanosecond)
		synctest.Wait()
		status, body := rec.body()
		if status != 200 || !strings.Contains(body, `"role":"assistant"`) || strings.Count(body, "data: ") != 1 {
			t.Fatalf("before the first token: status %d, body %q; want the role chunk alone", status, body)
		}
		time.Sleep(time.Nanosecond)
		<-done
		if _, body := rec.body(); !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("after the first-token time: body %q", body)
		}
	})
}

func TestFirstTokenWaitCountsClientsThatLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Tokens: 3, TokenInterval: -1, TTFT: TTFT{Tail: 1, TailDelay: time.Hour}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		_, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(true, conv("Hi"))).WithContext(ctx))
		synctest.Wait()
		cancel()
		<-done
		if got := s.Stats().FirstTokenAbandoned; got != 1 {
			t.Fatalf("FirstTokenAbandoned = %d, want 1", got)
		}
	})
}

func TestTTFTDrawHasItsMedianAndTail(t *testing.T) {
	d := TTFT{P50: 100 * time.Millisecond, Tail: 0.1, TailDelay: 3 * time.Second}
	const n = 20000
	below, tail := 0, 0
	for range n {
		switch v := d.draw(); {
		case v == d.TailDelay:
			tail++
		case v < d.P50:
			below++
		case v > 5*d.P50:
			t.Fatalf("ordinary draw %v is beyond 5 × p50", v)
		}
	}
	// Binomial bounds far beyond 5 sigma.
	if tail < n/10-500 || tail > n/10+500 {
		t.Errorf("tail draws = %d of %d, want about 10%%", tail, n)
	}
	if ordinary := n - tail; below < ordinary/2-600 || below > ordinary/2+600 {
		t.Errorf("%d of %d ordinary draws below p50, want about half", below, ordinary)
	}
}

func TestTTFTValidate(t *testing.T) {
	for _, bad := range []TTFT{{P50: -1}, {Tail: 1.5, TailDelay: time.Second}, {Tail: 0.1}} {
		if err := (Config{TTFT: bad}).Validate(); err == nil {
			t.Errorf("TTFT %+v: no error", bad)
		}
	}
}

// Every dialect waits for the first token before its first delta.
func TestFirstTokenAfterInEveryDialect(t *testing.T) {
	for _, tc := range []struct{ path, delta string }{
		{"/v1/messages", "content_block_delta"},
		{"/v1/responses", "response.output_text.delta"},
	} {
		synctest.Test(t, func(t *testing.T) {
			s, err := New(fullSpeed(3), nil)
			if err != nil {
				t.Fatal(err)
			}
			body := map[string]any{"model": "mock-1", "stream": true, "max_tokens": 100,
				"messages": []Message{{Role: roleUser, Content: "[[mock: first_token_after=2s, reasoning=2]]"}}, "input": "[[mock: first_token_after=2s]]"}
			req := chatRequestFor(t, body)
			req.URL.Path = tc.path
			rec, done := serveRecorded(t, s.Handler(), req)
			time.Sleep(2*time.Second - time.Nanosecond)
			synctest.Wait()
			if status, got := rec.body(); status != 200 || strings.Contains(got, tc.delta) {
				t.Fatalf("%s before the first-token time: status %d, body %q", tc.path, status, got)
			}
			time.Sleep(time.Nanosecond)
			<-done
			if _, got := rec.body(); !strings.Contains(got, tc.delta) {
				t.Fatalf("%s after the first-token time: body %q", tc.path, got)
			}
		})
	}
}
