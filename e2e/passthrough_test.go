package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// passthroughTokens is the answer length of the pass-through tests.
const passthroughTokens = 12

// rawMembers decodes a JSON object into its raw members.
func rawMembers(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

// rawAt follows member names (and "0", the first element of an array)
// through raw JSON and returns the value found, "" when absent.
func rawAt(t *testing.T, raw []byte, names ...string) string {
	t.Helper()
	for _, n := range names {
		if n == "0" {
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil || len(a) == 0 {
				return ""
			}
			raw = a[0]
			continue
		}
		if len(raw) == 0 || raw[0] != '{' {
			return ""
		}
		raw = rawMembers(t, raw)[n]
	}
	return string(raw)
}

// logprobEntries returns the raw entries of a logprobs object's content.
func logprobEntries(t *testing.T, raw string) []string {
	t.Helper()
	var lp struct {
		Content []json.RawMessage `json:"content"`
	}
	if raw == "" || raw == "null" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), &lp); err != nil {
		t.Fatalf("logprobs %s: %v", raw, err)
	}
	var out []string
	for _, e := range lp.Content {
		out = append(out, string(e))
	}
	return out
}

// mockDirect asks the fake upstream itself, not through the relay, for a
// whole answer: what a client of the provider would have got.
func mockDirect(t *testing.T, sys *system, body map[string]any) []byte {
	t.Helper()
	body["stream"] = false
	b, _ := json.Marshal(body)
	res, err := http.Post(sys.fronts["mock"].url+"/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("mock: %d %s", res.StatusCode, out)
	}
	return out
}

// TestPassthroughReasoningAndLogprobs sends a thinking model's answer with
// logprobs through a real worker and edge, to openai-go (streamed across a
// cut and its continuation, and whole) and to a Responses client. The reasoning arrives once, before
// the answer and never inside it; every token's logprobs entry arrives
// exactly as the provider wrote it; usage details and the fingerprint are
// the provider's.
func TestPassthroughReasoningAndLogprobs(t *testing.T) {
	sys := start(t, options{Mock: mockupstream.Config{Tokens: passthroughTokens, TokenInterval: 2 * time.Millisecond}, Tune: withFastRetry(nil)})
	client := openai.NewClient(option.WithBaseURL(sys.Edge+"/v1/"), option.WithAPIKey("relay-dev"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("stream across a cut", func(t *testing.T) {
		content := "[[mock: reasoning=3, cut_after=5]] passthrough stream"
		msgs, want := prompt(content, passthroughTokens)
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:       "mock-1",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
			Logprobs:    openai.Bool(true),
			TopLogprobs: openai.Int(2),
		})
		var text, reasoning, tokens strings.Builder
		var entries []string
		attempts := map[int64]bool{}
		for stream.Next() {
			c := stream.Current()
			if len(c.Choices) == 0 {
				continue
			}
			ch := c.Choices[0]
			if r, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				if err := json.Unmarshal([]byte(r.Raw()), &s); err != nil {
					t.Fatal(err)
				}
				if text.Len() > 0 {
					t.Fatalf("reasoning %q after answer text %q", s, text.String())
				}
				reasoning.WriteString(s)
			}
			text.WriteString(ch.Delta.Content)
			for _, lp := range ch.Logprobs.Content {
				tokens.WriteString(lp.Token)
				if len(lp.TopLogprobs) != 2 || lp.TopLogprobs[0].Token != lp.Token {
					t.Fatalf("top_logprobs of %q = %+v", lp.Token, lp.TopLogprobs)
				}
			}
			entries = append(entries, logprobEntries(t, ch.Logprobs.RawJSON())...)
			if ch.Delta.Content != "" && c.SystemFingerprint != "fp_mock" {
				t.Fatalf("chunk %s: system_fingerprint %q", c.RawJSON(), c.SystemFingerprint)
			}
			var relay struct {
				Attempt int64 `json:"attempt"`
			}
			if r, ok := c.JSON.ExtraFields["relay"]; ok && json.Unmarshal([]byte(r.Raw()), &relay) == nil && relay.Attempt > 0 {
				attempts[relay.Attempt] = true
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want || tokens.String() != want {
			t.Fatalf("text %q, logprobs tokens %q, want both %q", text.String(), tokens.String(), want)
		}
		if r := strings.Join(mockupstream.Reasoning(msgs, 3), ""); reasoning.String() != r {
			t.Fatalf("reasoning %q, want %q", reasoning.String(), r)
		}
		if !attempts[2] {
			t.Fatalf("attempts %v: the cut was not continued", attempts)
		}
		// Byte for byte, each entry as the provider writes it: the mock's
		// entries depend on the token alone, not on where the answer was
		// cut, and its directive applied only to the first request.
		direct := mockDirect(t, sys, map[string]any{"model": "mock-1", "messages": msgs, "logprobs": true, "top_logprobs": 2})
		if got, want := strings.Join(entries, "\n"), strings.Join(logprobEntries(t, rawAt(t, direct, "choices", "0", "logprobs")), "\n"); got != want {
			t.Fatalf("logprobs entries through the relay\n %s\nfrom the provider\n %s", got, want)
		}
	})

	t.Run("whole answer", func(t *testing.T) {
		content := "[[mock: reasoning=3, times=0]] passthrough whole"
		msgs, want := prompt(content, passthroughTokens)
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "mock-1",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
			Logprobs:    openai.Bool(true),
			TopLogprobs: openai.Int(1),
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := c.Choices[0]
		if ch.Message.Content != want || c.SystemFingerprint != "fp_mock" {
			t.Fatalf("content %q, fingerprint %q", ch.Message.Content, c.SystemFingerprint)
		}
		if got, r := ch.Message.JSON.ExtraFields["reasoning_content"].Raw(), mustMarshal(t, strings.Join(mockupstream.Reasoning(msgs, 3), "")); got != r {
			t.Fatalf("reasoning_content %s, want %s", got, r)
		}
		if u := c.Usage; u.CompletionTokensDetails.ReasoningTokens != 3 || u.CompletionTokens != passthroughTokens+3 || !u.PromptTokensDetails.JSON.CachedTokens.Valid() {
			t.Fatalf("usage %s", u.RawJSON())
		}
		// The provider's own whole answer to the same request has the
		// same logprobs object, byte for byte.
		direct := mockDirect(t, sys, map[string]any{"model": "mock-1", "messages": msgs, "logprobs": true, "top_logprobs": 1})
		if got, want := ch.Logprobs.RawJSON(), rawAt(t, direct, "choices", "0", "logprobs"); got != want {
			t.Fatalf("logprobs through the relay\n %s\nfrom the provider\n %s", got, want)
		}
	})

	t.Run("responses", func(t *testing.T) {
		content := "[[mock: reasoning=3]] passthrough responses"
		msgs, want := prompt(content, passthroughTokens)
		body, _ := json.Marshal(map[string]any{"model": "mock-1", "input": content, "stream": true, "top_logprobs": 1})
		res, err := http.Post(sys.Edge+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var reasoning, text, tokens strings.Builder
		var completed []byte
		for line := range strings.SplitSeq(string(raw), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type     string `json:"type"`
				Delta    string `json:"delta"`
				Logprobs []struct {
					Token string `json:"token"`
				} `json:"logprobs"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			switch ev.Type {
			case "response.reasoning_text.delta":
				if text.Len() > 0 {
					t.Fatalf("reasoning after text: %s", data)
				}
				reasoning.WriteString(ev.Delta)
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
				for _, lp := range ev.Logprobs {
					tokens.WriteString(lp.Token)
				}
			case "response.completed":
				completed = []byte(data)
			}
		}
		if r := strings.Join(mockupstream.Reasoning(msgs, 3), ""); reasoning.String() != r || text.String() != want || tokens.String() != want {
			t.Fatalf("reasoning %q, text %q, logprobs tokens %q; want %q, %q", reasoning.String(), text.String(), tokens.String(), r, want)
		}
		if got := rawAt(t, completed, "response", "usage", "output_tokens_details", "reasoning_tokens"); got != "3" {
			t.Fatalf("reasoning_tokens %s in %s", got, completed)
		}
		if got := rawAt(t, completed, "response", "output", "0", "type"); got != `"reasoning"` {
			t.Fatalf("first output item %s", got)
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPassthroughGoldenChunk replays a chunk with every member of OpenAI's
// reference, reasoning and members no client knows yet, from a provider
// of its own, and checks that each member the relay does not rewrite
// reaches a streaming client byte for byte.
func TestPassthroughGoldenChunk(t *testing.T) {
	golden, err := os.ReadFile("../relay/dialect/chat/testdata/chunk_openai_full.json")
	if err != nil {
		t.Fatal(err)
	}
	golden = bytes.TrimSpace(golden)
	usage := rawAt(t, golden, "usage")
	first := rawMembers(t, golden)
	delete(first, "usage")
	firstChunk, _ := json.Marshal(first)
	finish := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	usageChunk := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":` + usage + `}`
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range []string{string(firstChunk), finish, usageChunk, "[DONE]"} {
			io.WriteString(w, "data: "+data+"\n\n")
		}
	}))
	t.Cleanup(provider.Close)
	sys := start(t, options{Tune: func(c *config.Config) { c.Providers[0].BaseURL = provider.URL }})

	body, _ := json.Marshal(map[string]any{"model": "mock-1", "stream": true, "messages": []map[string]string{{"role": "user", "content": "golden"}}})
	res, err := http.Post(sys.Edge+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var chunks [][]byte
	for line := range strings.SplitSeq(string(raw), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			chunks = append(chunks, []byte(data))
		}
	}
	if res.StatusCode != http.StatusOK || len(chunks) != 2 {
		t.Fatalf("status %d, %d chunks: %s", res.StatusCode, len(chunks), raw)
	}
	for _, path := range [][]string{
		{"system_fingerprint"},
		{"service_tier"},
		{"choices", "0", "logprobs"},
		{"choices", "0", "stop_reason"},
		{"choices", "0", "delta", "content"},
		{"choices", "0", "delta", "reasoning_content"},
		{"choices", "0", "delta", "annotations"},
		{"choices", "0", "delta", "audio"},
	} {
		if got, want := rawAt(t, chunks[0], path...), rawAt(t, golden, path...); got != want || want == "" {
			t.Errorf("%s = %s, want %s", strings.Join(path, "."), got, want)
		}
	}
	for _, path := range [][]string{{"prompt_tokens_details"}, {"completion_tokens_details"}} {
		if got, want := rawAt(t, chunks[1], append([]string{"usage"}, path...)...), rawAt(t, []byte(usage), path...); got != want {
			t.Errorf("usage.%s = %s, want %s", path[0], got, want)
		}
	}
	if got := rawAt(t, chunks[0], "obfuscation"); got != "" {
		t.Errorf("obfuscation %s reached the client: it pads the provider's chunks, not the relay's", got)
	}
}
