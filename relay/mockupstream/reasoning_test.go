package mockupstream

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestReasoningPrecedesTheAnswer(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(4))
	msgs := conv("think first [[mock: reasoning=3]]")
	r := stream(t, ts, chatBody(true, msgs))
	if r.err != nil || !r.done {
		t.Fatalf("err %v, done %v", r.err, r.done)
	}
	var reasoning []string
	for i, c := range r.chunks[1:4] {
		d := c.Choices[0].Delta
		if d.Reasoning == nil || d.Content != nil {
			t.Fatalf("chunk %d: delta %+v, want reasoning_content only", i+1, d)
		}
		reasoning = append(reasoning, *d.Reasoning)
	}
	if want := Reasoning(msgs, 3); strings.Join(reasoning, "|") != strings.Join(want, "|") {
		t.Fatalf("reasoning = %q, want %q", reasoning, want)
	}
	if got, want := r.text(), AnswerText(msgs, 4); got != want || strings.Contains(got, strings.Join(reasoning, "")) {
		t.Fatalf("answer = %q, want %q without the reasoning", got, want)
	}
	u := r.usage()
	if u.CompletionTokens != 7 || string(u.CompletionTokensDetails) != `{"reasoning_tokens":3,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}` ||
		string(u.PromptTokensDetails) != `{"cached_tokens":0,"audio_tokens":0}` {
		t.Fatalf("usage = %+v, details %s %s", u, u.PromptTokensDetails, u.CompletionTokensDetails)
	}
	if r.chunks[0].SystemFingerprint != systemFingerprint {
		t.Fatalf("system_fingerprint = %q", r.chunks[0].SystemFingerprint)
	}
}

func TestPlainAnswerHasNoDetailsOrLogprobs(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(2))
	r := stream(t, ts, chatBody(true, conv("plain")))
	for _, c := range r.chunks {
		for _, ch := range c.Choices {
			if ch.Delta.Reasoning != nil || string(ch.Logprobs) != "null" {
				t.Fatalf("choice %+v, logprobs %s", ch, ch.Logprobs)
			}
		}
	}
	if u := r.usage(); u.PromptTokensDetails != nil || u.CompletionTokensDetails != nil {
		t.Fatalf("usage details %s %s on a plain answer", u.PromptTokensDetails, u.CompletionTokensDetails)
	}
}

func TestLogprobsWhenAsked(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(3))
	msgs := conv("logprobs")
	r := stream(t, ts, chatBody(true, msgs, "logprobs", true, "top_logprobs", 2))
	tokens := Answer(msgs, 3)
	var n int
	for _, c := range r.chunks {
		ch := c.Choices
		if len(ch) == 0 || ch[0].Delta.Content == nil || *ch[0].Delta.Content == "" {
			continue
		}
		var lp struct {
			Content []struct {
				Token       string `json:"token"`
				Logprob     float64
				Bytes       []int `json:"bytes"`
				TopLogprobs []struct {
					Token string `json:"token"`
				} `json:"top_logprobs"`
			} `json:"content"`
			Refusal json.RawMessage `json:"refusal"`
		}
		if err := json.Unmarshal(ch[0].Logprobs, &lp); err != nil {
			t.Fatalf("logprobs %s: %v", ch[0].Logprobs, err)
		}
		e := lp.Content[0]
		if len(lp.Content) != 1 || e.Token != tokens[n] || len(e.Bytes) != len(tokens[n]) || e.Logprob >= 0 ||
			len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Token != tokens[n] || string(lp.Refusal) != "null" {
			t.Fatalf("logprobs of token %d = %s", n, ch[0].Logprobs)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d tokens with logprobs, want 3", n)
	}

	resp := post(t, ts, "/v1/chat/completions", "", chatBody(false, conv("logprobs whole [[mock: reasoning=2]]"), "logprobs", true))
	var c struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
			Logprobs struct {
				Content []struct {
					Token string `json:"token"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&c) != nil {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ch := c.Choices[0]
	if ch.Message.Reasoning == "" || len(ch.Logprobs.Content) != 3 || ch.Logprobs.Content[0].Token+ch.Logprobs.Content[1].Token+ch.Logprobs.Content[2].Token != ch.Message.Content {
		t.Fatalf("non-stream choice = %+v", ch)
	}
}
