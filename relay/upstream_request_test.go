package relay

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/provider"
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
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Status != 400 || pe.Type != protocol.TypeInvalidRequest {
			t.Errorf("upstreamBody(%s) error = %v, want a 400 invalid_request_error", tc.body, err)
		}
	}
}
