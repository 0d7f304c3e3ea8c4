package mockupstream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// These tests run the handler on a recorder inside a synctest bubble, so
// stalls and pacing are checked against a fake clock, exactly and at once.

func TestStallBeforeSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(fullSpeed(3), nil)
		if err != nil {
			t.Fatal(err)
		}
		rec, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(true, conv("[[mock: stall_before=10s]]"))))
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if status, body := rec.body(); status != 0 || body != "" {
			t.Fatalf("before the stall ended: status %d, body %q", status, body)
		}
		time.Sleep(time.Nanosecond)
		<-done
		if status, body := rec.body(); status != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("after the stall: status %d, body %q", status, body)
		}
	})
}

func TestStallEndsWhenClientLeaves(t *testing.T) {
	for _, directive := range []string{"[[mock: stall_before=1h]]", "[[mock: stall_after=1, stall_for=1h]]"} {
		synctest.Test(t, func(t *testing.T) {
			s, err := New(fullSpeed(3), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			req := chatRequestFor(t, chatBody(true, conv(directive))).WithContext(ctx)
			start := time.Now()
			_, done := serveRecorded(t, s.Handler(), req)
			synctest.Wait()
			cancel()
			<-done
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("%s: handler returned after %v, want at once", directive, waited)
			}
		})
	}
}

func TestStallAfterSendsComments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Tokens: 4, TokenInterval: -1, CommentInterval: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs := conv("[[mock: stall_after=2, stall_for=3500ms]]")
		rec, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(true, msgs)))
		synctest.Wait()
		_, body := rec.body()
		if n := strings.Count(body, `"content":`) - 1; n != 2 || strings.Contains(body, ": keepalive") {
			t.Fatalf("at the start of the stall: %d content chunks, body %q", n, body)
		}
		time.Sleep(3500*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		_, body = rec.body()
		if n := strings.Count(body, ": keepalive\n\n"); n != 3 || strings.Count(body, `"content":`)-1 != 2 {
			t.Fatalf("during the stall: %d comments, body %q; want 3 comments and still 2 tokens", n, body)
		}
		<-done
		_, body = rec.body()
		if !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, `"content":`)-1 != 4 {
			t.Fatalf("after the stall: %q", body)
		}
	})
}

func TestTokenIntervalPacesStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Tokens: 5, TokenInterval: 100 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		rec, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(true, conv("paced"))))
		for want := range 5 {
			synctest.Wait()
			if _, body := rec.body(); strings.Count(body, `"content":`)-1 != want {
				t.Fatalf("at %v: want %d tokens, body %q", time.Since(start), want, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		<-done
		if elapsed := time.Since(start); elapsed != 500*time.Millisecond {
			t.Fatalf("stream took %v, want 500ms", elapsed)
		}
	})
}

func TestNonStreamingTakesGenerationTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Tokens: 5}, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		rec, done := serveRecorded(t, s.Handler(), chatRequestFor(t, chatBody(false, conv("slow"))))
		<-done
		if elapsed := time.Since(start); elapsed != 5*defaultTokenInterval {
			t.Fatalf("non-streaming answer took %v, want %v", elapsed, 5*defaultTokenInterval)
		}
		if status, body := rec.body(); status != 200 || !strings.Contains(body, `"object":"chat.completion"`) {
			t.Fatalf("status %d, body %q", status, body)
		}
	})
}
