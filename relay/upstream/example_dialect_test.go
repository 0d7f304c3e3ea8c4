package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/relaydev/relay/relay/upstream"
)

// A provider of another dialect takes the same chat request and yields the
// same Deltas: here Anthropic's Messages API continues a prefill whose
// trailing space it would refuse, and restates that space, which is
// dropped so that the continuation joins the text exactly.
func ExampleDialect() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path, r.Header.Get("anthropic-version"), r.Header.Get("x-api-key"))
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\n"+
			`data: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":12,"output_tokens":1}}}`+"\n\n"+
			"event: content_block_delta\n"+
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`+"\n\n"+
			"event: message_delta\n"+
			`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`+"\n\n"+
			"event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n")
	}))
	defer provider.Close()

	target := upstream.Target{Provider: "claude", BaseURL: provider.URL + "/v1", APIKey: "sk-ant", Dialect: upstream.DialectAnthropic}
	chat := `{"model":"claude-x","messages":[{"role":"user","content":"Greet"},{"role":"assistant","content":"Hello "}]}`
	s, err := upstream.NewClient(nil).Stream(context.Background(), target, []byte(chat))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for {
		d, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if d.Content != "" {
			fmt.Printf("content %q\n", d.Content)
		}
		if d.Usage != nil {
			fmt.Println("tokens", d.Usage.PromptTokens, d.Usage.CompletionTokens)
		}
	}
	fmt.Println("finish", s.FinishReason())
	// Output:
	// /v1/messages 2023-06-01 sk-ant
	// content "world"
	// tokens 12 2
	// finish stop
}
