package e2e

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/mockupstream"
)

// TestSDKRetryPaysOnce: openai-go retries a non-stream request whose
// response was lost in transport (after the edge served it); the retry
// attaches to the stream the first attempt started, so the provider is
// called once in total and the SDK returns the answer.
func TestSDKRetryPaysOnce(t *testing.T) {
	sys := startSDKSystem(t)
	var attempts atomic.Int32
	lose := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if attempts.Add(1) == 1 && err == nil {
			res.Body.Close() // the connection breaks before the client reads the answer
			return nil, errors.New("connection reset by peer")
		}
		return res, err
	}
	client := openai.NewClient(
		option.WithBaseURL(sys.Edge+"/v1/"),
		option.WithAPIKey("relay-dev"),
		option.WithMaxRetries(2),
		option.WithMiddleware(lose),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const content = "go sdk: retried after a broken connection"
	var res *http.Response
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
	}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Choices[0].Message.Content, answerTo(content); got != want {
		t.Fatalf("content %q, want %q", got, want)
	}
	if attempts.Load() != 2 || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d attempts, replayed %q; want the SDK's retry served the first attempt's stream", attempts.Load(), res.Header.Get("Idempotent-Replayed"))
	}
	key := mockupstream.ConversationKey([]mockupstream.Message{{Role: "user", Content: content}})
	if n := sys.Mock.Stats().ByConversation[key]; n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
}
