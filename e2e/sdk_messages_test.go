package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// nodeMessagesResult is what e2e/node/messages_test.mjs prints last.
type nodeMessagesResult struct {
	Whole struct {
		Text, Stop, ID string
		OutputTokens   int `json:"output_tokens"`
	} `json:"whole"`
	Tools struct {
		Text, Stop string
	} `json:"tools"`
	Prefill struct {
		Text, Stop string
	} `json:"prefill"`
	Refused struct {
		Name, Type string
		Status     int
	} `json:"refused"`
	Stream struct {
		Text, Final, Stop string
		OutputTokens      int `json:"output_tokens"`
	} `json:"stream"`
	Resumed struct {
		ID                  string
		Cursor, Status      int
		Before, After, Last string
		Stop                *string
	} `json:"resumed"`
}

// TestSDKNodeMessages runs the official @anthropic-ai/sdk
// (e2e/node/messages_test.mjs) against two edge and two worker processes
// in front of the mock, an OpenAI-compatible upstream: a whole answer, a
// tool round trip, a prefill continued across a dropped connection, a
// refusal, the SDK's stream helper, then a
// stream cut after ten text deltas whose worker is SIGKILLed before the
// client resumes it after its last event's id on the other edge. Every
// answer is the one exact answer, and the takeover does not show.
func TestSDKNodeMessages(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 2, Workers: 2})
	const input = "node messages: the worker is killed mid-answer"
	user := func(texts ...string) []mockupstream.Message {
		msgs := make([]mockupstream.Message, len(texts))
		for i, text := range texts {
			msgs[i] = mockupstream.Message{Role: "user", Content: text}
		}
		return msgs
	}
	// The prefill is the answer's first three tokens; the mock cuts the
	// first answer to it after five more.
	const prefilled = input + " (prefill) [[mock: cut_after=5]]"
	prefill := strings.Join(mockupstream.Answer(user(prefilled), tokens)[:3], "")
	var cut struct {
		ID     string `json:"id"`
		Cursor int    `json:"cursor"`
	}
	var r nodeMessagesResult
	var id, owner string
	runNodeCut(t, "node/messages_test.mjs", []string{s.edgeProcs[0].URL, s.edgeProcs[1].URL, input, prefill}, func(line []byte) {
		must(t, json.Unmarshal(line, &cut))
		id = strings.TrimPrefix(cut.ID, "msg_")
		owner = s.killOwner(id)
	}, &r)

	if want := mockupstream.AnswerText(user(input+" (whole)"), tokens); r.Whole.Text != want || r.Whole.Stop != "end_turn" || r.Whole.OutputTokens != tokens {
		t.Errorf("whole answer %q (%s, %d tokens), want %q", r.Whole.Text, r.Whole.Stop, r.Whole.OutputTokens, want)
	}
	if want := mockupstream.AnswerText(user(input+" (tools)", "and tomorrow?"), tokens); r.Tools.Text != want || r.Tools.Stop != "end_turn" {
		t.Errorf("answer after the tool result %q (%s), want %q", r.Tools.Text, r.Tools.Stop, want)
	}
	if want := mockupstream.AnswerText(user(prefilled), tokens); prefill+r.Prefill.Text != want || r.Prefill.Text == want {
		t.Errorf("prefilled %q + answer %q, want %q", prefill, r.Prefill.Text, want)
	}
	if r.Refused.Name != "BadRequestError" || r.Refused.Status != http.StatusBadRequest || r.Refused.Type != "invalid_request_error" {
		t.Errorf("a refused stream raised %+v, want a BadRequestError (400, invalid_request_error)", r.Refused)
	}
	if want := mockupstream.AnswerText(user(input+" (stream)"), tokens); r.Stream.Text != want || r.Stream.Final != want || r.Stream.Stop != "end_turn" || r.Stream.OutputTokens != tokens {
		t.Errorf("stream helper %q, final %q (%s, %d tokens), want %q", r.Stream.Text, r.Stream.Final, r.Stream.Stop, r.Stream.OutputTokens, want)
	}
	_, want := prompt(input, tokens)
	got := r.Resumed
	if got.Status != http.StatusOK || got.Before+got.After != want || got.Before == "" || got.After == "" || got.Last != "message_stop" || got.Stop == nil || *got.Stop != "end_turn" {
		t.Errorf("resumed after event %d: %d %q + %q, last %s (%v), want %q split in two", got.Cursor, got.Status, got.Before, got.After, got.Last, got.Stop, want)
	}
	s.expectTakeover(id, owner)
}
