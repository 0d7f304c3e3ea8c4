package edge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestInputTextAndImages: on every API, text that is not UTF-8 and an
// image from anywhere but https: and image data: are a 400 invalid_value
// in the API's error shape, naming the field as the API names it, and
// nothing reaches JetStream.
func TestInputTextAndImages(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{Keepalive: 50 * time.Millisecond})
	chatMessages := func(content string) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"},{"role":"user","content":%s}]}`, testModel, content)
	}
	chatImage := chatMessages(`[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]`)
	responsesInput := func(content string) string {
		return fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":%s}]}`, testModel, content)
	}
	responsesImage := responsesInput(`[{"type":"input_image","image_url":"javascript:alert(1)"}]`)
	messages := func(content string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":%s}]}`, testModel, content)
	}
	messagesImage := messages(`[{"type":"image","source":{"type":"base64","media_type":"text/html","data":"PHNjcmlwdD4="}}]`)
	for _, tc := range []struct {
		name, path, body, param string
	}{
		{"chat, invalid UTF-8", "/v1/chat/completions", chatMessages("\"caf\xe9\""), "messages[1].content"},
		{"chat, a lone surrogate", "/v1/chat/completions", chatMessages(`"\ud800"`), "messages[1].content"},
		{"chat, a file: image", "/v1/chat/completions", chatImage, "messages[1].content[0].image_url.url"},
		{"responses, invalid UTF-8", "/v1/responses", responsesInput("\"\xff\""), "input[0].content"},
		{"responses, a lone surrogate", "/v1/responses", responsesInput(`"\udc00"`), "input[0].content"},
		{"responses, a javascript: image", "/v1/responses", responsesImage, "input[0].content[0].image_url"},
		{"messages, invalid UTF-8", "/v1/messages", messages("\"\xc3\""), "messages.0.content"},
		{"messages, a lone surrogate", "/v1/messages", messages(`"\ud83d"`), "messages.0.content"},
		{"messages, base64 text/html", "/v1/messages", messagesImage, "messages.0.content.0.source.media_type"},
		{"embeddings, a lone surrogate", "/v1/embeddings", fmt.Sprintf(`{"model":%q,"input":["a","\ud800"]}`, testModel), "input[1]"},
		{"completions, invalid UTF-8", "/v1/completions", fmt.Sprintf("{\"model\":%q,\"prompt\":\"\xff\"}", testModel), "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, edge.url+tc.path, tc.body, nil)
			if tc.path == "/v1/messages" {
				// Anthropic's errors have no param: the message names it.
				got := decodeAnthropicError(t, res)
				if res.StatusCode != http.StatusBadRequest || got.Type != "invalid_request_error" || !strings.HasPrefix(got.Message, tc.param+": ") {
					t.Fatalf("%d %+v, want a 400 invalid_request_error naming %s", res.StatusCode, got, tc.param)
				}
				return
			}
			got := decodeError(t, res)
			if res.StatusCode != http.StatusBadRequest || got.Type != "invalid_request_error" || got.Code != CodeInvalidValue || got.Param != tc.param || !strings.Contains(got.Message, tc.param) {
				t.Fatalf("%d %+v, want a 400 invalid_value naming %s", res.StatusCode, got, tc.param)
			}
		})
	}
	checkQueueEmpty(t, e)
	// A valid pair and an https image are accepted: the stream's head
	// goes after a keepalive interval without a worker.
	ok := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"\ud83d\ude00"},`+
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, testModel)
	if res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", ok, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("a valid request: %d %s", res.StatusCode, readAll(t, res))
	}
}
