package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/mockupstream"
)

// A chat-completions client (openai-go) streams from a provider that
// speaks another dialect, through real processes. The provider's 400 is the
// client's 400; its 429 is waited out; its error event mid-answer is
// continued. An answer is cut by the provider
// mid-way and continued in the provider's dialect (a prefill for
// Anthropic, prompt mode for the Responses API), then the worker streaming
// it is SIGKILLed and another takes it over. The client sees neither: one
// exact answer, finished.
func TestUpstreamDialectCutAndKilledWorker(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		calls func(mockupstream.Stats) int
	}{
		{"anthropic", func(s mockupstream.Stats) int { return s.MessagesRequests }},
		{"openai_responses", func(s mockupstream.Stats) int { return s.ResponsesRequests }},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			const tokens = 80
			s := start(t, options{Processes: true, ProviderType: tc.typ, Workers: 2,
				Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			client := openai.NewClient(option.WithBaseURL(s.Edge+"/v1/"), option.WithAPIKey("relay-dev"), option.WithMaxRetries(0))
			ask := func(content string) openai.ChatCompletionNewParams {
				return openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)}}
			}

			// The provider's 400, in its dialect's error shape, reaches the
			// client as a 400 with the provider's message.
			refused := client.Chat.Completions.NewStreaming(ctx, ask("Dialect "+tc.typ+": refused. [[mock: status=400]]"))
			for refused.Next() {
			}
			var apiErr *openai.Error
			if !errors.As(refused.Err(), &apiErr) || apiErr.StatusCode != http.StatusBadRequest ||
				apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "injected fault status=400") {
				t.Fatalf("refused stream: %v, want the provider's 400 invalid_request_error", refused.Err())
			}
			// A 429 with Retry-After is waited out and retried.
			limited, wantLimited := prompt("Dialect "+tc.typ+": rate limited. [[mock: status=429, retry_after=1]]", tokens)
			began := time.Now()
			c, err := client.Chat.Completions.New(ctx, ask(limited[0].Content))
			if err != nil || c.Choices[0].Message.Content != wantLimited {
				t.Fatalf("after a 429: %v, content %q", err, c.Choices[0].Message.Content)
			}
			if waited := time.Since(began); waited < time.Second {
				t.Errorf("answered %v after a 429 asking for 1s", waited)
			}
			// The dialect's error event mid-answer (Anthropic's
			// overloaded_error) is continued like a cut.
			overloaded, wantOverloaded := prompt("Dialect "+tc.typ+": overloaded. [[mock: error_after=5]]", tokens)
			c, err = client.Chat.Completions.New(ctx, ask(overloaded[0].Content))
			if err != nil || c.Choices[0].Message.Content != wantOverloaded || c.Choices[0].FinishReason != "stop" {
				t.Fatalf("after an error event: %v, content %q", err, c.Choices[0].Message.Content)
			}

			msgs, want := prompt("Dialect "+tc.typ+": cut, then the worker is killed. [[mock: cut_after=10]]", tokens)
			var res *http.Response
			stream := client.Chat.Completions.NewStreaming(ctx, ask(msgs[0].Content), option.WithResponseInto(&res))
			defer stream.Close()

			var acc openai.ChatCompletionAccumulator
			seams := map[string]int{}
			read := func() bool {
				if !stream.Next() {
					return false
				}
				c := stream.Current()
				acc.AddChunk(c)
				var ext struct {
					Relay struct {
						Seam string `json:"seam"`
					} `json:"relay"`
				}
				if json.Unmarshal([]byte(c.RawJSON()), &ext) == nil && ext.Relay.Seam != "" {
					seams[ext.Relay.Seam]++
				}
				return true
			}
			// Past the cut at 10 tokens and well into the continuation.
			for i := 0; i < 25 && read(); i++ {
			}
			if seams["continuation"] != 1 || len(acc.Choices) == 0 {
				t.Fatalf("after 25 chunks: seams %v, want the continuation of the cut (err %v)", seams, stream.Err())
			}
			id := res.Header.Get("X-Relay-Stream-Id")
			owner := s.owner(id, 1, 5*time.Second).Frame.Worker
			must(t, s.worker(owner).Kill())
			t.Logf("SIGKILLed %s after %d characters", owner, len(acc.Choices[0].Message.Content))
			for read() {
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}

			if got := acc.Choices[0].Message.Content; got != want {
				t.Fatalf("content\n%q\nwant\n%q", got, want)
			}
			if acc.Choices[0].FinishReason != "stop" {
				t.Errorf("finish reason %q, want stop", acc.Choices[0].FinishReason)
			}
			if seams["takeover"] != 1 {
				t.Errorf("seams %v, want one continuation and one takeover", seams)
			}
			if claims := s.frames.claims(id); len(claims) != 2 || claims[1].Frame.Worker == owner {
				t.Errorf("claims by %v; want %s, then the other worker", claimWorkers(claims), owner)
			}
			st := s.mockStats()
			// The first call, its continuation after the cut, and the
			// takeover's continuation, after the refused call, the
			// rate-limited one and its retry, the overloaded one and its
			// continuation: all in the provider's dialect.
			if n := st.ByConversation[mockupstream.ConversationKey(msgs)]; n != 3 || tc.calls(st) != 8 || st.ChatRequests != 0 {
				t.Errorf("the fake upstream saw %d calls of the conversation (%+v); want 3, none of them chat completions", n, st)
			}
		})
	}
}
