package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
)

// Forwarded endpoints: /v1/embeddings and /v1/completions go through a
// worker to the providers, with the generations' routing, retries and
// fallbacks, and reach the official Go SDK as OpenAI would answer them.

const forwardTokens = 12

func forwardClient(t *testing.T, sys *system) openai.Client {
	t.Helper()
	return openai.NewClient(option.WithBaseURL(sys.Edge+"/v1/"), option.WithAPIKey("relay-dev"), option.WithMaxRetries(0))
}

func forwardCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// expectEmbedding checks one embedding against the mock's vector of input.
func expectEmbedding(t *testing.T, got openai.Embedding, index int, input string, dims int) {
	t.Helper()
	want := mockupstream.Embedding(input, dims)
	if int(got.Index) != index || len(got.Embedding) != dims {
		t.Fatalf("embedding %d: index %d, %d dimensions; want %d dimensions", index, got.Index, len(got.Embedding), dims)
	}
	for i, x := range got.Embedding {
		if float32(x) != want[i] {
			t.Fatalf("embedding %d of %q: component %d is %v, want %v", index, input, i, x, want[i])
		}
	}
}

func TestForwardEmbeddings(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Mock: mockupstream.Config{Tokens: forwardTokens, TokenInterval: -1}})
	client, ctx := forwardClient(t, sys), forwardCtx(t)

	t.Run("one input", func(t *testing.T) {
		res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model:      "mock-1",
			Input:      openai.EmbeddingNewParamsInputUnion{OfString: openai.String("forward: one")},
			Dimensions: openai.Int(64),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 1 || res.Model != "mock-1" || res.Usage.TotalTokens == 0 {
			t.Fatalf("%d embeddings of model %q, usage %+v", len(res.Data), res.Model, res.Usage)
		}
		expectEmbedding(t, res.Data[0], 0, "forward: one", 64)
	})

	t.Run("many inputs, an answer larger than a NATS message", func(t *testing.T) {
		const n, dims = 64, 2048
		inputs := make([]string, n)
		for i := range inputs {
			inputs[i] = fmt.Sprintf("forward: input %d", i)
		}
		res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model:      "mock-1",
			Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
			Dimensions: openai.Int(dims),
		})
		if err != nil {
			t.Fatal(err)
		}
		raw := res.RawJSON()
		if len(raw) <= 1<<20 {
			t.Fatalf("the answer is %d bytes; the test needs one over 1 MiB, NATS's default max_payload", len(raw))
		}
		if len(res.Data) != n {
			t.Fatalf("%d embeddings, want %d", len(res.Data), n)
		}
		for i, e := range res.Data {
			expectEmbedding(t, e, i, inputs[i], dims)
		}
	})

	t.Run("unknown model is a 404", func(t *testing.T) {
		_, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "no-such-model",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("forward: 404")},
		})
		expectStatus(t, err, http.StatusNotFound, "invalid_request_error")
	})

	t.Run("provider 400 is a BadRequestError", func(t *testing.T) {
		_, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "mock-1",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("[[mock: status=400]] forward: refused")},
		})
		expectStatus(t, err, http.StatusBadRequest, "invalid_request_error")
	})
}

func TestForwardCompletions(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Mock: mockupstream.Config{Tokens: forwardTokens, TokenInterval: time.Millisecond}, Tune: withFastRetry(nil)})
	client, ctx := forwardClient(t, sys), forwardCtx(t)
	params := func(p string) openai.CompletionNewParams {
		return openai.CompletionNewParams{Model: "mock-1", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)}}
	}

	t.Run("whole answer", func(t *testing.T) {
		c, err := client.Completions.New(ctx, params("forward: whole"))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Text != answerText("forward: whole", forwardTokens) || c.Choices[0].FinishReason != "stop" {
			t.Fatalf("choices %+v, want the text %q", c.Choices, answerText("forward: whole", forwardTokens))
		}
	})

	t.Run("stream", func(t *testing.T) {
		s := client.Completions.NewStreaming(ctx, params("forward: stream"))
		var text strings.Builder
		chunks, finish := 0, ""
		for s.Next() {
			c := s.Current()
			chunks++
			for _, ch := range c.Choices {
				text.WriteString(ch.Text)
				finish += string(ch.FinishReason)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if got, want := text.String(), answerText("forward: stream", forwardTokens); got != want || finish != "stop" || chunks <= forwardTokens {
			t.Fatalf("%d chunks, finish %q, text %q; want %q, stop", chunks, finish, got, want)
		}
	})

	t.Run("provider 429 then success", func(t *testing.T) {
		const p = "[[mock: status=429, times=1]] forward: rate limited"
		c, err := client.Completions.New(ctx, params(p))
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Text != answerText(p, forwardTokens) {
			t.Fatalf("text %q, want %q", c.Choices[0].Text, answerText(p, forwardTokens))
		}
		key := mockupstream.ConversationKey([]mockupstream.Message{{Role: "user", Content: p}})
		if n := sys.Mock.Stats().ByConversation[key]; n != 2 {
			t.Fatalf("the provider was called %d times, want 2 (a 429, then the answer)", n)
		}
	})

	t.Run("provider 400 on a stream is a BadRequestError", func(t *testing.T) {
		s := client.Completions.NewStreaming(ctx, params("[[mock: status=400]] forward: refused stream"))
		for s.Next() {
		}
		expectStatus(t, s.Err(), http.StatusBadRequest, "invalid_request_error")
	})

	t.Run("cut stream ends with an error", func(t *testing.T) {
		s := client.Completions.NewStreaming(ctx, params("[[mock: cut_after=3]] forward: cut"))
		var text strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				text.WriteString(ch.Text)
			}
		}
		if s.Err() == nil {
			t.Fatalf("a stream cut after %q ended without an error", text.String())
		}
	})
}

func TestForwardFallsBackToBackupProvider(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	sys := start(t, options{
		Mock: mockupstream.Config{Tokens: forwardTokens, TokenInterval: -1},
		Tune: withFastRetry(func(cfg *config.Config) {
			mockURL := cfg.Providers[0].BaseURL
			cfg.Providers = []provider.Config{
				{Name: "down", BaseURL: dead, Models: []string{"mock-1"}, BackupProviders: []string{"backup"}, Retry: fastRetry},
				{Name: "backup", BaseURL: mockURL, Models: []string{"mock-1"}, Retry: fastRetry},
			}
		}),
	})
	client, ctx := forwardClient(t, sys), forwardCtx(t)
	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:      "mock-1",
		Input:      openai.EmbeddingNewParamsInputUnion{OfString: openai.String("forward: fallback")},
		Dimensions: openai.Int(32),
	})
	if err != nil {
		t.Fatal(err)
	}
	expectEmbedding(t, res.Data[0], 0, "forward: fallback", 32)
	c, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "mock-1", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("forward: fallback")}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Text != answerText("forward: fallback", forwardTokens) {
		t.Fatalf("text %q, want %q", c.Choices[0].Text, answerText("forward: fallback", forwardTokens))
	}
}

// expectStatus checks that err is the SDK's API error with status and
// error type.
func expectStatus(t *testing.T, err error, status int, typ string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Type != typ {
		t.Fatalf("error = %v, want a %d %s", err, status, typ)
	}
}

// A worker killed while it holds a forwarded request, before any of the
// answer reached the client: the edge hears nothing from it for
// wire.ForwardSilence and sends the request to another worker, and the
// client gets the whole answer.
func TestForwardSurvivesAWorkerKilledMidRequest(t *testing.T) {
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: forwardTokens, TokenInterval: 5 * time.Millisecond}})
	ctx := forwardCtx(t)
	client := forwardClient(t, s)
	// The first call stalls; the retry is answered at once.
	const p = "[[mock: stall_before=20s, times=1]] forward: the worker dies"
	key := mockupstream.ConversationKey([]mockupstream.Message{{Role: "user", Content: p}})
	type result struct {
		c   *openai.Completion
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "mock-1", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)}})
		done <- result{c, err}
	}()
	waitFor(t, 20*time.Second, "the first call to reach the provider", func() bool { return s.mockStats().ByConversation[key] == 1 })
	s.workerProcs = append(s.workerProcs, s.startWorker(ctx, nil))
	killed := time.Now()
	if err := s.workerProcs[0].Kill(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.c.Choices[0].Text != answerText(p, forwardTokens) {
		t.Fatalf("text %q, want %q", r.c.Choices[0].Text, answerText(p, forwardTokens))
	}
	if n := s.mockStats().ByConversation[key]; n != 2 {
		t.Fatalf("the provider was called %d times, want 2 (the killed worker's call, then the retry)", n)
	}
	t.Logf("answered %v after the kill", time.Since(killed).Round(time.Millisecond))
}
