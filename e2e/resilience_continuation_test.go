package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
)

// Failures after text was published: the worker asks again with
// the text so far and publishes only what is new, so the client sees one
// uninterrupted answer, exactly the fault-free text.

func TestStallMidStreamIsContinued(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 40, TokenInterval: -1},
		Tune:   withFastRetry(func(cfg *config.Config) { cfg.Providers[0].StallTimeout = 300 * time.Millisecond }),
	})
	const content = "[[mock: stall_after=5, stall_for=10s]] Tell me more."
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 2)
	if got, want := a.textOf(1, 1), tokensText(content, 40, 5); got != want {
		t.Fatalf("first attempt published %q, want the 5 tokens before the stall %q", got, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
}

func TestKeepaliveCommentsCountAsLife(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 20, TokenInterval: -1, CommentInterval: 50 * time.Millisecond},
		Tune:   withFastRetry(func(cfg *config.Config) { cfg.Providers[0].StallTimeout = time.Second }),
	})
	// Silent for 2.5s but for comments: thinking, not stalled. The stall
	// timeout is twenty comment intervals, so that a loaded machine's late
	// comment is not taken for a stall.
	const content = "[[mock: stall_after=5, stall_for=2500ms]] Think first."
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 20), 1)
	expectSeams(t, a)
}

func TestCutMidStreamIsContinued(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: cut_after=5]] Tell me more."
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 2)
	if got, want := a.textOf(1, 1), tokensText(content, 40, 5); got != want {
		t.Fatalf("first attempt published %q, want %q", got, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
	calls := sys.fronts["mock"].allChats()
	if len(calls) != 2 || !slices.Equal(calls[1].roles, []string{"user", "assistant"}) {
		t.Fatalf("upstream calls %+v, want the continuation to end with the assistant's text (prefill)", calls)
	}
}

func TestWriteSplitInsideMultiByteCharacter(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 60, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: split_utf8]] Grüße aus 東京 🚀"
	// ask checks that every chunk is valid UTF-8 on its own.
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 60), 1)
	multi := 0
	for _, p := range a.pieces {
		if len(p.Content) != len([]rune(p.Content)) {
			multi++
		}
	}
	if multi == 0 {
		t.Fatal("no chunk held a multi-byte character: the test tested nothing")
	}
}

func TestMalformedChunkIsContinued(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: malformed_after=3]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 2)
	if got, want := a.textOf(1, 1), tokensText(content, 40, 3); got != want {
		t.Fatalf("first attempt published %q, want %q", got, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
}

func TestDoneMissingAfterFinishReasonIsDone(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 30, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: no_done]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 30), 1)
	expectVerdicts(t, sys.Gate, "mock/mock-1:success")
}

func TestEOFWithoutFinishReasonIsContinued(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: eof_after=5]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 2)
	if got, want := a.textOf(1, 1), tokensText(content, 40, 5); got != want {
		t.Fatalf("first attempt published %q, want %q", got, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
	expectVerdicts(t, sys.Gate, "mock/mock-1:failure", "mock/mock-1:success")
}

func TestPrefillRejectedSwitchesToPromptMode(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	// Call 1 is cut; call 2, a prefill, is refused; call 3 asks in prompt
	// mode.
	const content = "[[mock: cut_after=5, reject_prefill, times=2]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 3)
	expectSeams(t, a, "continuation:mock/mock-1#3")
	calls := sys.fronts["mock"].allChats()
	var roles []string
	for _, c := range calls {
		roles = append(roles, strings.Join(c.roles, ","))
	}
	if want := []string{"user", "user,assistant", "user,assistant,user"}; !slices.Equal(roles, want) {
		t.Fatalf("upstream calls' roles %q, want %q", roles, want)
	}
	if st := sys.Mock.Stats(); st.ByStatus[http.StatusBadRequest] != 1 {
		t.Fatalf("mock answered %v, want one 400", st.ByStatus)
	}
	// The refused prefill is not the provider's failure.
	expectVerdicts(t, sys.Gate, "mock/mock-1:failure", "mock/mock-1:neutral", "mock/mock-1:success")
}

func TestOverlapAtTheSeamIsStripped(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1},
		Tune: withFastRetry(func(c *config.Config) { c.Providers[0].Continuation = provider.Prompt })})
	// Call 1 is cut after 30 tokens; call 2, asked in prompt mode to
	// continue, first repeats the last 12 characters, then finishes (its 11
	// chunks never reach cut_after).
	const content = "[[mock: cut_after=30, overlap=12, times=2]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 40), 2)
	expectSeams(t, a, "continuation:mock/mock-1#2")
	if got, want := a.textOf(2, 2), answerText(content, 40)[len(tokensText(content, 40, 30)):]; got != want {
		t.Fatalf("the continuation published %q, want %q without the repeat", got, want)
	}
}

func TestPrefillContinuationIsNeverStripped(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	// The same repeat after a prefill: a provider extending a prefilled
	// answer does not restate it, so text that repeats the end of the
	// answer is the answer's own and reaches the client whole.
	const content = "[[mock: cut_after=30, overlap=12, times=2]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	cut := tokensText(content, 40, 30)
	repeat := string([]rune(cut)[len([]rune(cut))-12:])
	if want := cut + repeat + answerText(content, 40)[len(cut):]; a.text != want || a.status != "done" {
		t.Fatalf("status %q, text %q; want done with the repeat kept: %q", a.status, a.text, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
}

func TestContinuationKeepsWithinMaxTokens(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	// The client allows 12 tokens; the first call is cut after 5, so the
	// continuation may only add 7, and the answer ends as a provider ends a
	// limited one.
	const content = "[[mock: cut_after=5, times=1]] Hello"
	a, err := readRequest(sys.Edge, map[string]any{
		"model": "mock-1", "stream": true, "max_tokens": 12,
		"messages": []mockupstream.Message{{Role: "user", Content: content}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := tokensText(content, 40, 12); a.text != want || a.status != "done" || a.finish != "length" {
		t.Fatalf("status %q, finish %q, text %q; want done, length, the first 12 tokens %q", a.status, a.finish, a.text, want)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2")
}

func TestRetriesExhaustedAfterPartialTextEndIncomplete(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 100, TokenInterval: -1},
		Tune:   withFastRetry(func(cfg *config.Config) { cfg.Providers[0].Retry.MaxRetries = 2 }),
	})
	// Every call is cut after 5 tokens; the provider allows 2 retries.
	const content = "[[mock: cut_after=5, times=0]] Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	if want := tokensText(content, 100, 15); a.text != want {
		t.Fatalf("text %q, want the 15 tokens of 3 calls %q", a.text, want)
	}
	if a.status != "incomplete" || a.finish != "" || a.errType != "incomplete_stream" || a.attempts != 3 {
		t.Fatalf("status %q, finish %q, error %q %q, %d attempts; want incomplete after 3, never done",
			a.status, a.finish, a.errType, a.errMsg, a.attempts)
	}
	expectSeams(t, a, "continuation:mock/mock-1#2", "continuation:mock/mock-1#3")
}

func TestLongAnswerCutFiveTimes(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 300, TokenInterval: -1}, Tune: withFastRetry(nil)})
	const content = "[[mock: cut_after=40, times=5]] A long answer, please."
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 300), 6)
	var want []string
	for n := 2; n <= 6; n++ {
		want = append(want, fmt.Sprintf("continuation:mock/mock-1#%d", n))
	}
	expectSeams(t, a, want...)
	for n := 1; n <= 5; n++ {
		if got, want := a.textOf(1, n), tokensText(content, 300, 40*n); got != want {
			t.Fatalf("after call %d the client had %q, want %q", n, got, want)
		}
	}
}
