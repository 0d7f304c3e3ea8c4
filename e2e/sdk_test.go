package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/relaydev/relay/relay/mockupstream"
)

// sdkTokens is the answer length of the SDK tests' fake upstream; its
// tokens come 5 ms apart, so that each is a chunk of its own and a resume
// after the third chunk has text left to resume.
const sdkTokens = 16

func startSDKSystem(t *testing.T) *system {
	t.Helper()
	return start(t, options{Coordinator: true, Mock: mockupstream.Config{Tokens: sdkTokens, TokenInterval: 5 * time.Millisecond}, Tune: withOpsModels(nil)})
}

func answerTo(content string) string {
	_, want := prompt(content, sdkTokens)
	return want
}

// chunkCursor is the relay extension's cursor of a chunk.
func chunkCursor(t *testing.T, raw string) string {
	t.Helper()
	var c struct {
		Relay struct {
			Cursor string `json:"cursor"`
		} `json:"relay"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil || c.Relay.Cursor == "" {
		t.Fatalf("chunk without a relay cursor: %s", raw)
	}
	return c.Relay.Cursor
}

// TestSDKGo uses the official OpenAI Go SDK against the edge, changing only
// its base URL: a streamed and a whole answer, the terminal error of a
// failed stream, and a resume through the SDK's own request and SSE
// machinery (client.Get on /v1/streams/{id} with Last-Event-ID).
func TestSDKGo(t *testing.T) {
	sys := startSDKSystem(t)
	client := openai.NewClient(
		option.WithBaseURL(sys.Edge+"/v1/"),
		option.WithAPIKey("relay-dev"), // ignored: the edge has no keys
		option.WithMaxRetries(0),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := func(content string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)}}
	}

	t.Run("whole answer", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, params("go sdk: whole"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Choices[0].Message.Content, answerTo("go sdk: whole"); got != want {
			t.Fatalf("content %q, want %q", got, want)
		}
		if c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != sdkTokens {
			t.Fatalf("finish %q, usage %+v", c.Choices[0].FinishReason, c.Usage)
		}
	})

	t.Run("stream", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, params("go sdk: stream"))
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if got, want := acc.Choices[0].Message.Content, answerTo("go sdk: stream"); got != want {
			t.Fatalf("content %q, want %q", got, want)
		}
	})

	t.Run("refused stream raises a 400", func(t *testing.T) {
		// The provider refused before any token: the stream is answered
		// with its status, so the SDK raises an *openai.Error, as it does
		// for the same refusal without streaming.
		s := client.Chat.Completions.NewStreaming(ctx, params("[[mock: status=400]] go sdk: failed"))
		for s.Next() {
		}
		var apiErr *openai.Error
		if !errors.As(s.Err(), &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" {
			t.Fatalf("stream error = %v, want a 400 invalid_request_error", s.Err())
		}
		_, err := client.Chat.Completions.New(ctx, params("[[mock: status=400]] go sdk: failed whole"))
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" {
			t.Fatalf("error = %v, want a 400 invalid_request_error", err)
		}
	})

	t.Run("model", func(t *testing.T) {
		m, err := client.Models.Get(ctx, "mock-1")
		if err != nil || m.ID != "mock-1" {
			t.Fatalf("model %+v, %v", m, err)
		}
		var apiErr *openai.Error
		_, err = client.Models.Get(ctx, "gpt-nope")
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Fatalf("unknown model: %v, want a 404 model_not_found", err)
		}
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-nope", Messages: params("x").Messages})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Fatalf("request for an unknown model: %v, want a 404 model_not_found", err)
		}
	})

	t.Run("resume", func(t *testing.T) {
		var res *http.Response
		s := client.Chat.Completions.NewStreaming(ctx, params("go sdk: resume"), option.WithResponseInto(&res))
		var before strings.Builder
		var cursor string
		for i := 0; i < 3 && s.Next(); i++ {
			c := s.Current()
			before.WriteString(c.Choices[0].Delta.Content)
			cursor = chunkCursor(t, c.RawJSON())
		}
		s.Close() // the connection breaks here
		id := res.Header.Get("X-Relay-Stream-Id")
		if cursor == "" || id == "" {
			t.Fatalf("no cursor (%q) or stream id (%q)", cursor, id)
		}
		var resumed *http.Response
		err := client.Get(ctx, "streams/"+id, nil, &resumed, option.WithHeader("Last-Event-ID", cursor))
		rest := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(resumed), err)
		var after strings.Builder
		for rest.Next() {
			if c := rest.Current(); len(c.Choices) > 0 {
				after.WriteString(c.Choices[0].Delta.Content)
			}
		}
		if err := rest.Err(); err != nil {
			t.Fatal(err)
		}
		if got, want := before.String()+after.String(), answerTo("go sdk: resume"); got != want || after.Len() == 0 {
			t.Fatalf("resumed text %q + %q, want %q split in two", before.String(), after.String(), want)
		}
	})
}

// nodeResult is what e2e/node/sdk_test.mjs prints.
type nodeResult struct {
	Whole   string `json:"whole"`
	Stream  string `json:"stream"`
	Resumed struct {
		Before string `json:"before"`
		After  string `json:"after"`
		Cursor string `json:"cursor"`
	} `json:"resumed"`
	Failed struct {
		Name   string `json:"name"`
		Status int    `json:"status"`
		Type   string `json:"type"`
	} `json:"failed"`
	FailedWhole struct {
		Name   string `json:"name"`
		Status int    `json:"status"`
		Type   string `json:"type"`
	} `json:"failed_whole"`
}

// nodeBinary is the path of node, checking that e2e/setup.sh installed the
// npm packages of e2e/node.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: install Node.js 20 or later, then run e2e/setup.sh")
	}
	for _, pkg := range []string{"openai", "ai", "@ai-sdk/openai", "@langchain/openai", "@langchain/core", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join("node", "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("the npm package %s is missing: run e2e/setup.sh (it runs npm ci in e2e/node)", pkg)
		}
	}
	return node
}

// TestSDKNode runs the official openai npm package (e2e/node, installed by
// e2e/setup.sh) against the edge: the same four cases as TestSDKGo.
func TestSDKNode(t *testing.T) {
	node := nodeBinary(t)
	sys := startSDKSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node/sdk_test.mjs", sys.Edge+"/v1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node sdk_test.mjs: %v\n%s", err, stderr.String())
	}
	var r nodeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("node output %q: %v\n%s", out, err, stderr.String())
	}
	if want := answerTo("node sdk: whole"); r.Whole != want {
		t.Errorf("whole answer %q, want %q", r.Whole, want)
	}
	if want := answerTo("node sdk: stream"); r.Stream != want {
		t.Errorf("streamed answer %q, want %q", r.Stream, want)
	}
	if want := answerTo("node sdk: resume"); r.Resumed.Before+r.Resumed.After != want || r.Resumed.Before == "" || r.Resumed.After == "" {
		t.Errorf("resumed %q + %q after %s, want %q split in two", r.Resumed.Before, r.Resumed.After, r.Resumed.Cursor, want)
	}
	if r.Failed.Name != "BadRequestError" || r.Failed.Status != http.StatusBadRequest || r.Failed.Type != "invalid_request_error" {
		t.Errorf("refused stream raised %+v, want a BadRequestError (400) of type invalid_request_error", r.Failed)
	}
	if r.FailedWhole.Name != "BadRequestError" || r.FailedWhole.Status != http.StatusBadRequest {
		t.Errorf("failed request raised %+v, want a BadRequestError (400)", r.FailedWhole)
	}
}
