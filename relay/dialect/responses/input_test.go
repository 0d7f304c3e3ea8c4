package responses

import (
	"net/http"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// TestResponsesRequestRefusesBadTextAndImages: text that is not UTF-8 and
// images from anywhere but https: and image data: are refused with a 400
// naming the field as the Responses API names it.
func TestResponsesRequestRefusesBadTextAndImages(t *testing.T) {
	image := func(url string) string {
		return `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"` + url + `"}]}]}`
	}
	for _, tc := range []struct {
		name, body, param string
		refused           bool
	}{
		{"invalid UTF-8 in a message", "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"user\",\"content\":\"caf\xe9\"}]}", "input[1].content", true},
		{"invalid UTF-8 in a string input", "{\"model\":\"m\",\"input\":\"\xff\"}", "input", true},
		{"a lone high surrogate", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"\ud800"}]}]}`, "input[0].content[0].text", true},
		{"a lone low surrogate", `{"model":"m","instructions":"\udc00","input":"hi"}`, "instructions", true},
		{"a valid pair", `{"model":"m","input":"\ud83d\ude00"}`, "", false},
		{"a file: image", image("file:///etc/passwd"), "input[0].content[1].image_url", true},
		{"a javascript: image", image("javascript:alert(1)"), "input[0].content[1].image_url", true},
		{"an http: image", image("http://10.0.0.1/a.png"), "input[0].content[1].image_url", true},
		{"a data:text/html image", image("data:text/html,<script>x</script>"), "input[0].content[1].image_url", true},
		{"an https image", image("https://example.com/a.png"), "", false},
		{"a data:image/png image", image("data:image/png;base64,iVBORw0KGgo="), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, e := ParseRequest([]byte(tc.body), anyModel)
			if !tc.refused {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				if _, e := chat.CheckRequest(req.Chat, chat.Limits{Served: func(string) bool { return true }, MaxMessages: -1, MaxTokens: -1}); e != nil {
					t.Fatalf("the chat request %s is refused: %+v", req.Chat, e)
				}
				return
			}
			if e == nil || e.Status != http.StatusBadRequest || e.Code != chat.CodeInvalidValue || e.Type != "invalid_request_error" || e.Param != tc.param || e.Message == "" {
				t.Fatalf("error %+v, want a 400 invalid_value naming %q", e, tc.param)
			}
		})
	}
}
