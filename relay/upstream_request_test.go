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
		name, prefill string
		want          string
	}{
		{"fresh", "", `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"}],"stream":true,
			"stream_options":{"include_usage":true,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`},
		{"continuation", "Hello <wörld>", `{"model":"m","messages":[{"role":"user","content":"hi","name":"bob"},
			{"role":"assistant","content":"Hello <wörld>"}],"stream":true,
			"stream_options":{"include_usage":true,"x_opt":1},"temperature":0.5,"x_vendor":{"a":[1,2]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := upstreamBody(json.RawMessage(client), "m", tc.prefill)
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
	got, err := upstreamBody(json.RawMessage(`{"messages":[],"stream_options":null}`), "m", "")
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
		_, err := upstreamBody(json.RawMessage(tc.body), "m", tc.prefill)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Status != 400 || pe.Type != protocol.TypeInvalidRequest {
			t.Errorf("upstreamBody(%s) error = %v, want a 400 invalid_request_error", tc.body, err)
		}
	}
}

func TestChooseTarget(t *testing.T) {
	c, err := provider.NewCatalog([]provider.Config{
		{Name: "a", BaseURL: "http://a/v1", Models: []string{"x"}},
		{Name: "b", BaseURL: "http://b/v1", APIKeys: []string{"k1", "k2"}, Models: []string{"x", "y"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := chooseTarget(c, "y"); err != nil || got.Provider != "b" || got.BaseURL != "http://b/v1" || got.APIKey != "k1" {
		t.Errorf("chooseTarget(y) = %+v, %v; want b with its first key", got, err)
	}
	if got, err := chooseTarget(c, "x"); err != nil || got.Provider != "a" || got.APIKey != "" {
		t.Errorf("chooseTarget(x) = %+v, %v; want a without key", got, err)
	}
	var pe *protocol.Error
	if _, err := chooseTarget(c, "z"); !errors.As(err, &pe) || pe.Status != 404 {
		t.Errorf("chooseTarget(z) error = %v, want a 404", err)
	}
}
