package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// Failures before the first token: each is retried with backoff
// and the client sees one answer, whose first chunk says it came from a
// retry.

func TestConnectionRefusedThenRecovered(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, MockLater: true, Mock: mockupstream.Config{Tokens: 30, TokenInterval: -1}, Tune: withFastRetry(nil)})
	// The first call finds the port closed; the provider comes up before
	// the second.
	sys.Gate.setBeforeAdmit(func(n int, _ string) {
		if n == 2 {
			sys.serveMock()
		}
	})
	const content = "Are you there?"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 30), 2)
	expectSeams(t, a, "retry:mock/mock-1#2")
	expectVerdicts(t, sys.Gate, "mock/mock-1:failure", "mock/mock-1:success")
	if n := len(sys.fronts["mock"].allChats()); n != 1 {
		t.Fatalf("the provider saw %d requests, want 1 (the first was refused)", n)
	}
}

func Test500ThenOK(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 30, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: status=500]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 30), 2)
	expectSeams(t, a, "retry:mock/mock-1#2")
	expectVerdicts(t, sys.Gate, "mock/mock-1:failure", "mock/mock-1:success")
	if st := sys.Mock.Stats(); st.ByStatus[http.StatusInternalServerError] != 1 || st.ByStatus[http.StatusOK] != 1 {
		t.Fatalf("mock answered %v, want one 500 and one 200", st.ByStatus)
	}
}

func Test502And503(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 30, TokenInterval: -1}, Tune: withFastRetry(nil)})
	for _, status := range []string{"502", "503"} {
		t.Run(status, func(t *testing.T) {
			content := "[[mock: status=" + status + ", times=2]] Hello"
			a := ask(t, sys.Edge, "mock-1", content)
			a.expectDone(t, answerText(content, 30), 3)
			expectSeams(t, a, "retry:mock/mock-1#3")
		})
	}
	if st := sys.Mock.Stats(); st.ByStatus[http.StatusBadGateway] != 2 || st.ByStatus[http.StatusServiceUnavailable] != 2 {
		t.Fatalf("mock answered %v, want two 502s and two 503s", st.ByStatus)
	}
}

func Test429WithRetryAfterWaitsAtLeastTwoSeconds(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: status=429, retry_after=2]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 20), 2)
	calls := sys.fronts["mock"].allChats()
	if len(calls) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(calls))
	}
	if gap := calls[1].at.Sub(calls[0].at); gap < 2*time.Second {
		t.Fatalf("the retry came %v after the 429, want at least the 2s of Retry-After", gap)
	}
	if a.firstText < 2*time.Second {
		t.Fatalf("first text after %v, want at least 2s", a.firstText)
	}
	if r := sys.Gate.report(0); r.RetryAfter != 2*time.Second {
		t.Fatalf("the gate was told Retry-After %v, want 2s (a cluster-wide gate pauses the provider with it)", r.RetryAfter)
	}
}

func TestStallBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 20, TokenInterval: -1},
		Tune:   withFastRetry(func(cfg *config.Config) { cfg.Providers[0].FirstTokenTimeout = 300 * time.Millisecond }),
	})
	const content = "[[mock: stall_before=10s]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 20), 2)
	expectSeams(t, a, "retry:mock/mock-1#2")
	if a.firstText > 5*time.Second {
		t.Fatalf("first text after %v: the stalled call was not abandoned after first_token_timeout", a.firstText)
	}
	expectVerdicts(t, sys.Gate, "mock/mock-1:failure", "mock/mock-1:success")
}

// A provider's refusal of the request itself (400, 404, 413, 422) before
// any token reaches the client as that HTTP status with the provider's
// error, is never retried, and is not counted against the provider.
func Test400IsSurfacedAndNotRetried(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}, Tune: withFastRetry(nil)})
	for _, status := range []int{400, 404, 413, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			// Refused before any token: the client gets the provider's
			// status and error, not a stream.
			_, err := read(sys.Edge, "mock-1", fmt.Sprintf("[[mock: status=%d]] Hello", status))
			var he *httpError
			if !errors.As(err, &he) || he.Status != status {
				t.Fatalf("%v; want HTTP %d", err, status)
			}
			var e struct {
				Error struct{ Message, Type string } `json:"error"`
			}
			if json.Unmarshal([]byte(he.Body), &e) != nil || e.Error.Message != fmt.Sprintf("mock-upstream: injected fault status=%d", status) {
				t.Fatalf("body %s, want the provider's error", he.Body)
			}
			if status == 400 && e.Error.Type != "invalid_request_error" {
				t.Fatalf("error type %q, want the provider's invalid_request_error", e.Error.Type)
			}
		})
	}
	if st := sys.Mock.Stats(); st.ChatRequests != 4 {
		t.Fatalf("%d upstream requests, want 4: a request fault is never retried", st.ChatRequests)
	}
	// The request's fault is not the provider's.
	expectVerdicts(t, sys.Gate, "mock/mock-1:neutral", "mock/mock-1:neutral", "mock/mock-1:neutral", "mock/mock-1:neutral")
}
