package mockupstream

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// TestAnthropicThinkingCacheAndStopSequence reads, through the relay's
// own Anthropic client, an answer with the reasoning directive and a stop
// sequence it holds: signed thinking, cache counts, and the answer cut
// before the sequence with stop_reason stop_sequence.
func TestAnthropicThinkingCacheAndStopSequence(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(12))
	msgs := conv("sign it [[mock: reasoning=3]]")
	answer := AnswerText(msgs, 12)
	runes := []rune(answer)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	body, _ := json.Marshal(chatBody(true, msgs, "stop", []string{"never said", stop}))
	s, err := upstream.NewClient(nil).Stream(t.Context(), upstream.Target{Provider: "mock", BaseURL: ts.URL + "/v1", Dialect: upstream.DialectAnthropic}, body)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var reasoning, text, sig strings.Builder
	var usage *chat.Usage
	for {
		d, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sig.Len() > 0 && d.Reasoning != "" {
			t.Fatalf("reasoning %q after the signature", d.Reasoning)
		}
		reasoning.WriteString(d.Reasoning)
		text.WriteString(d.Content)
		sig.WriteString(d.ReasoningSignature)
		if d.Usage != nil {
			usage = d.Usage
		}
	}
	if want := strings.Join(Reasoning(msgs, 3), ""); reasoning.String() != want || sig.String() != signature(want) {
		t.Errorf("thinking %q signed %q, want %q signed %q", reasoning.String(), sig.String(), want, signature(want))
	}
	if want := answer[:strings.Index(answer, stop)]; text.String() != want || s.FinishReason() != "stop" || s.StopSequence() != stop {
		t.Errorf("answer %q (finish %q, stop sequence %q), want %q stopped by %q", text.String(), s.FinishReason(), s.StopSequence(), want, stop)
	}
	created := promptTokens(msgs[:1])
	if usage == nil || created == 0 || usage.PromptTokens != promptTokens(msgs) ||
		usage.PromptTokensDetails.Get("cached_tokens") != 0 || usage.PromptTokensDetails.Get(wire.CacheCreationTokens) != created {
		t.Errorf("usage = %+v, want %d prompt tokens of which %d written to the cache", usage, promptTokens(msgs), created)
	}
}

// TestAnthropicWholeAnswerThinksAndStops: the non-streamed Message has the
// signed thinking block, the answer cut before the stop sequence, and the
// cache counts.
func TestAnthropicWholeAnswerThinksAndStops(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(12))
	msgs := conv("whole and signed [[mock: reasoning=2]]")
	answer := AnswerText(msgs, 12)
	runes := []rune(answer)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	resp := post(t, ts, "/v1/messages", "", map[string]any{"model": "mock-1", "max_tokens": 100, "system": msgs[0].Content, "stop_sequences": []string{stop},
		"messages": []map[string]any{{"role": "user", "content": msgs[1].Content}}})
	var m struct {
		Content      []struct{ Type, Text, Thinking, Signature string } `json:"content"`
		StopReason   string                                             `json:"stop_reason"`
		StopSequence string                                             `json:"stop_sequence"`
		Usage        claudeUsage                                        `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	thinking := strings.Join(Reasoning(msgs, 2), "")
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != thinking || m.Content[0].Signature != signature(thinking) ||
		m.Content[1].Text != answer[:strings.Index(answer, stop)] || m.StopReason != "stop_sequence" || m.StopSequence != stop {
		t.Errorf("message %+v, want signed thinking, then the answer stopped by %q", m, stop)
	}
	if created := promptTokens(msgs[:1]); m.Usage.CacheCreationInputTokens != created || m.Usage.InputTokens != promptTokens(msgs)-created {
		t.Errorf("usage %+v, want %d tokens written to the cache", m.Usage, created)
	}
}
