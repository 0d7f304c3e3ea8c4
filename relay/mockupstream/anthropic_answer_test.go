package mockupstream

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

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
	var usage *upstream.Usage
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
