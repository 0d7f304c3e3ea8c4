package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/relaydev/relay/relay/upstream"
)

func Example() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": keep-alive\n\n"+
			`data: {"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}`+"\n\n"+
			`data: {"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer provider.Close()

	c := upstream.Client{StallTimeout: 30 * time.Second}
	target := upstream.Target{Provider: "example", BaseURL: provider.URL + "/v1", APIKey: "sk-example"}
	s, err := c.Stream(context.Background(), target, []byte(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		fmt.Println(upstream.Classify(err), err)
		return
	}
	defer s.Close()
	for {
		d, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(upstream.Classify(err), err)
			return
		}
		if d.Content != "" {
			fmt.Printf("content %q\n", d.Content)
		}
		if d.Usage != nil {
			fmt.Println("tokens", d.Usage.TotalTokens)
		}
	}
	fmt.Println("finish", s.FinishReason(), "done", s.SawDone())
	// Output:
	// content "Hello"
	// content " world"
	// tokens 7
	// finish stop done true
}

func ExampleClassify() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	defer provider.Close()

	_, err := upstream.NewClient(nil).Stream(context.Background(), upstream.Target{Provider: "busy", BaseURL: provider.URL}, nil)
	var se *upstream.StatusError
	if errors.As(err, &se) {
		fmt.Println(upstream.Classify(err), se.RetryAfter, se.Err.Code)
	}
	fmt.Println(err)
	// Output:
	// transient 3s rate_limit_exceeded
	// upstream: busy: status 429: Rate limit reached
}
