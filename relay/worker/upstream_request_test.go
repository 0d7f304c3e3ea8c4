package worker

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

func TestUpstreamBody(t *testing.T) {
	client := `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"}],"stream":false,
		"stream_options":{"include_usage":false,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`
	for _, tc := range []struct {
		name string
		cont continuation
		want string
	}{
		{"fresh", continuation{}, `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"}],"stream":true,
			"stream_options":{"include_usage":true,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`},
		{"prefill", continuation{text: "Hello <wörld>", mode: provider.Prefill, prompt: "unused"}, `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"},
			{"role":"assistant","content":"Hello <wörld>"}],"stream":true,
			"stream_options":{"include_usage":true,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`},
		{"prompt", continuation{text: "Hello <wörld>", mode: provider.Prompt, prompt: "Go on."}, `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"},
			{"role":"assistant","content":"Hello <wörld>"},{"role":"user","content":"Go on."}],"stream":true,
			"stream_options":{"include_usage":true,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upstreamBody(json.RawMessage(client), "m", tc.cont)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("body = %s\nwant   %s", got, tc.want)
			}
		})
	}
}

// TestUpstreamBodyContinuesAPrefill: a request that ends with an
// assistant message of text (a prefill) is continued in that message; one
// that ends with tool calls, or with a user message, gets a new one.
func TestUpstreamBodyContinuesAPrefill(t *testing.T) {
	for _, tc := range []struct{ name, messages, want string }{
		{"a prefill", `[{"role":"user","content":"count"},{"role":"assistant","content":"1, 2,","name":"x"}]`,
			`[{"role":"user","content":"count"},{"role":"assistant","content":"1, 2, 3,","name":"x"}]`},
		{"tool calls", `[{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"r"},{"role":"assistant","content":"a","tool_calls":[{"id":"c"}]}]`,
			`[{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"r"},{"role":"assistant","content":"a","tool_calls":[{"id":"c"}]},{"role":"assistant","content":" 3,"}]`},
		{"no prefill", `[{"role":"user","content":"count"}]`, `[{"role":"user","content":"count"},{"role":"assistant","content":" 3,"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upstreamBody(json.RawMessage(`{"messages":`+tc.messages+`}`), "m", continuation{text: " 3,", mode: provider.Prefill})
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Messages any }
			var want any
			if err := json.Unmarshal(got, &body); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(body.Messages, want) {
				t.Fatalf("messages = %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestUpstreamBodyAddsStreamOptions(t *testing.T) {
	got, err := upstreamBody(json.RawMessage(`{"messages":[],"stream_options":null}`), "m", continuation{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(got, &body); err != nil || !body.StreamOptions.IncludeUsage {
		t.Fatalf("body = %s: include_usage not set", got)
	}
}

func TestUpstreamBodyRejects(t *testing.T) {
	for _, tc := range []struct{ body, prefill string }{
		{`[]`, ""},
		{`null`, ""},
		{`{"stream_options":3}`, ""},
		{`{"messages":"x"}`, "so far"},
	} {
		_, err := upstreamBody(json.RawMessage(tc.body), "m", continuation{text: tc.prefill})
		var pe *wire.Error
		if !errors.As(err, &pe) || pe.Status != 400 || pe.Type != wire.TypeInvalidRequest {
			t.Errorf("upstreamBody(%s) error = %v, want a 400 invalid_request_error", tc.body, err)
		}
	}
}

func TestUpstreamBodyReducesTokenLimits(t *testing.T) {
	client := `{"messages":[],"max_tokens":100,"max_completion_tokens":80}`
	for _, tc := range []struct {
		name             string
		cont             continuation
		maxTokens, maxCT int
	}{
		{"fresh", continuation{}, 100, 80},
		{"continuation", continuation{text: "so far", tokens: 30}, 70, 50},
		{"spent", continuation{text: "so far", tokens: 90}, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upstreamBody(json.RawMessage(client), "m", tc.cont)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				MaxTokens int `json:"max_tokens"`
				MaxCT     int `json:"max_completion_tokens"`
			}
			if err := json.Unmarshal(got, &body); err != nil {
				t.Fatal(err)
			}
			if body.MaxTokens != tc.maxTokens || body.MaxCT != tc.maxCT {
				t.Fatalf("max_tokens %d, max_completion_tokens %d; want %d and %d", body.MaxTokens, body.MaxCT, tc.maxTokens, tc.maxCT)
			}
		})
	}
}

func TestTokenLimit(t *testing.T) {
	for body, want := range map[string]int{
		`{}`:                  0,
		`{"max_tokens":null}`: 0,
		`{"max_tokens":"9"}`:  0,
		`{"max_tokens":0}`:    0,
		`{"max_tokens":12}`:   12,
		`{"max_tokens":12,"max_completion_tokens":7}`: 7,
		`{"max_completion_tokens":7}`:                 7,
	} {
		if got, ok := tokenLimit(json.RawMessage(body)); got != want || ok != (want > 0) {
			t.Errorf("tokenLimit(%s) = %d, %v; want %d", body, got, ok, want)
		}
	}
}
