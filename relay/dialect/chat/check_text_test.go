package chat

import (
	"net/http"
	"strings"
	"testing"
)

// TestCheckRequestRefusesBadTextAndImages: text that is not UTF-8 and
// images from anywhere but https: and image data: are refused with a 400
// naming the field, by the one pass and encoding/json alike; what is
// valid is accepted, by the one pass.
func TestCheckRequestRefusesBadTextAndImages(t *testing.T) {
	body := func(messages ...string) string {
		return `{"model":"gpt-test","messages":[` + strings.Join(messages, ",") + `]}`
	}
	hi := `{"role":"user","content":"hi"}`
	image := func(url string) string {
		return `{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}`
	}
	for _, tc := range []struct {
		name, body, param string
		refused           bool
	}{
		{"invalid UTF-8 in a message", body(hi, "{\"role\":\"user\",\"content\":\"caf\xe9\"}"), "messages[1].content", true},
		{"a lone high surrogate", body(`{"role":"user","content":"a\ud800b"}`), "messages[0].content", true},
		{"a lone low surrogate", body(hi, hi, `{"role":"user","content":"\udfff"}`), "messages[2].content", true},
		{"a lone surrogate in a part", body(`{"role":"user","content":[{"type":"text","text":"\ud83d"}]}`), "messages[0].content[0].text", true},
		{"a lone surrogate in a tool call", body(hi, `{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"\ud800"}}]}`), "messages[1].tool_calls[0].function.arguments", true},
		{"a surrogate in another member", `{"model":"gpt-test","user":"\udc00","messages":[` + hi + `]}`, "user", true},
		{"invalid UTF-8 in a member name", body("{\"role\":\"user\",\"content\":\"hi\",\"n\xffme\":\"x\"}"), "messages[0]", true},
		{"invalid UTF-8 in a top-level name", "{\"model\":\"gpt-test\",\"x\xff\":1,\"messages\":[" + hi + "]}", "", true},
		{"a valid pair", body(`{"role":"user","content":"\ud83d\ude00 and \uD83D\uDE00"}`), "", false},
		{"an escaped backslash before ud800", body(`{"role":"user","content":"C:\\ud800"}`), "", false},
		{"a file: image", body(image("file:///etc/passwd")), "messages[0].content[1].image_url.url", true},
		{"a javascript: image", body(image("javascript:alert(1)")), "messages[0].content[1].image_url.url", true},
		{"an http: image", body(image("http://169.254.169.254/latest/meta-data")), "messages[0].content[1].image_url.url", true},
		{"a data:text/html image", body(image("data:text/html;base64,PHNjcmlwdD4=")), "messages[0].content[1].image_url.url", true},
		{"a data: URL without a comma", body(image("data:image/png;base64")), "messages[0].content[1].image_url.url", true},
		{"an https: URL without a host", body(image("https:///x.png")), "messages[0].content[1].image_url.url", true},
		{"an image_url without a url", body(`{"role":"user","content":[{"type":"image_url","image_url":{}}]}`), "messages[0].content[0].image_url", true},
		{"an image_url part without an image_url", body(`{"role":"user","content":[{"type":"image_url"}]}`), "messages[0].content[0].image_url", true},
		{"an image_url a string", body(`{"role":"user","content":[{"type":"image_url","image_url":"https://x/i.png"}]}`), "messages[0].content[0].image_url", true},
		{"an image_url in a part of another type", body(`{"role":"user","content":[{"type":"text","text":"x","image_url":{"url":"file:///x"}}]}`), "messages[0].content[0].image_url.url", true},
		{"an https image", body(image("https://example.com/a.png")), "", false},
		{"an HTTPS image", body(image("HTTPS://example.com/a.png")), "", false},
		{"a data:image/png image", body(image("data:image/png;base64,iVBORw0KGgo=")), "", false},
		{"a data:image/webp image", body(image("data:image/webp;base64,UklGRg==")), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, e := CheckRequest([]byte(tc.body), fuzzLimits)
			if !tc.refused {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				if _, ok := scanRequest([]byte(tc.body), fuzzLimits); !ok || req.Model != testModel {
					t.Fatalf("left to encoding/json (%v), or accepted as %+v", ok, req)
				}
				return
			}
			if e == nil || e.Status != http.StatusBadRequest || e.Code != CodeInvalidValue || e.Type != "invalid_request_error" || e.Param != tc.param || e.Message == "" {
				t.Fatalf("error %+v, want a 400 invalid_value naming %q", e, tc.param)
			}
			if _, ok := scanRequest([]byte(tc.body), fuzzLimits); ok {
				t.Fatal("the one pass accepted it")
			}
		})
	}
}
