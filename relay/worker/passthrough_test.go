package worker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// logprobTokens is the concatenation of the tokens of a chunk's logprobs.
func logprobTokens(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var lp struct {
		Content []struct {
			Token string `json:"token"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &lp); err != nil {
		t.Fatalf("logprobs %s: %v", raw, err)
	}
	var b strings.Builder
	for _, e := range lp.Content {
		b.WriteString(e.Token)
	}
	return b.String()
}

// A cut answer with reasoning is continued from its text alone: the
// prefill the mock receives is a prefix of its answer (else it would
// answer from the start and the text would not be the answer), and the
// reasoning stays where it came, in the first attempt's chunks.
func TestReasoningIsNeverContinuedAsText(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 30, TokenInterval: -1}})
	id := wire.NewStreamID()
	content := "[[mock: reasoning=4, cut_after=6]] think"
	h.submitBody(id, "mock-1", map[string]any{"model": "mock-1", "messages": userMessages(content), "logprobs": true, "top_logprobs": 1})

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	msgs := userMessages(content)
	if want := mockupstream.AnswerText(msgs, 30); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	var reasoning strings.Builder
	for _, c := range chunks {
		if c.Reasoning != "" && c.Attempt != 1 {
			t.Fatalf("reasoning in attempt %d: %+v", c.Attempt, c)
		}
		reasoning.WriteString(c.Reasoning)
		if c.SystemFingerprint != "fp_mock" {
			t.Fatalf("chunk %d: system_fingerprint %q", c.Seq, c.SystemFingerprint)
		}
		if c.Content != "" && logprobTokens(t, c.Logprobs) != c.Content {
			t.Fatalf("chunk %d: logprobs %s do not describe its text %q", c.Seq, c.Logprobs, c.Content)
		}
	}
	if want := strings.Join(mockupstream.Reasoning(msgs, 4), ""); reasoning.String() != want {
		t.Fatalf("reasoning = %q, want %q", reasoning.String(), want)
	}
	if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 2 {
		t.Fatalf("end = %+v, want done after 2 attempts", end)
	}
}

// In prompt mode the mock repeats the end of the answer at the start of a
// continuation; the relay strips the repeat, and the logprobs of the
// repeat with it: every chunk's logprobs describe exactly its text, and
// the chunk after the stripped repeat says logprobs are missing.
func TestStrippedRepeatDropsItsLogprobs(t *testing.T) {
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 30, TokenInterval: -1},
		providers: func(mockURL string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: mockURL, Models: []string{"mock-1"}, Retry: fastRetry, Continuation: provider.Prompt}}
		},
	})
	id := wire.NewStreamID()
	// Request 2, the first continuation, repeats 9 runes and is cut
	// again; request 3 continues cleanly.
	content := "[[mock: cut_after=6, overlap=9, times=2]] repeat"
	h.submitBody(id, "mock-1", map[string]any{"model": "mock-1", "messages": userMessages(content), "logprobs": true})

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 30); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	gaps := 0
	for _, c := range chunks {
		if c.LogprobsGap {
			gaps++
			if c.Attempt != 2 {
				t.Errorf("logprobs gap in attempt %d, want only where the repeat was stripped", c.Attempt)
			}
		}
		if c.Content != "" && logprobTokens(t, c.Logprobs) != c.Content {
			t.Fatalf("chunk %d: logprobs %s do not describe its text %q", c.Seq, c.Logprobs, c.Content)
		}
	}
	if gaps != 1 {
		t.Fatalf("%d chunks with a logprobs gap, want 1", gaps)
	}
}

func TestUsageDetailsAreSummedOverAttempts(t *testing.T) {
	j := &job{}
	j.addUsage(nil, provider.Price{})
	var a, b wire.Usage
	for raw, u := range map[string]*wire.Usage{
		`{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}`: &a,
		`{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":5,"audio_tokens":1}}`:                                  &b,
	} {
		if err := json.Unmarshal([]byte(raw), u); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []wire.Usage{a, b} {
		j.addUsage(&chat.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
			PromptTokensDetails: u.PromptTokensDetails, CompletionTokensDetails: u.CompletionTokensDetails}, provider.Price{})
	}
	got, err := json.Marshal(j.usage)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"prompt_tokens":14,"completion_tokens":7,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":5,"audio_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}`
	if string(got) != want {
		t.Fatalf("usage = %s\nwant    %s", got, want)
	}
}
