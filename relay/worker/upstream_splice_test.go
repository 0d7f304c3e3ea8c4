package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/relaytest"
)

// spliceSeeds are client bodies the splice fuzz target starts from.
var spliceSeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`,
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{}`, ` { } `, `{"stream_options":null}`, `{"stream_options":{}}`, `{"stream_options":{ }}`,
	`{"stream_options":{"include_usage":true,"x":1}}`, `{"stream_options":{"x":[1,2]}}`,
	`{"stream_options":{"include_usage":false}}`, `{"stream_options":3}`,
	`{"model":"a","model":"b"}`, `{"mod\u0065l":"a"}`, `{"stream":false,"temperature":0.5 }`,
	"{\n  \"model\": \"m\",\n  \"messages\": []\n}\n", `[]`, `null`, `{"a":1,}`,
}

// FuzzSpliceBody holds spliceBody to decodeBody: a body it writes is
// valid JSON and, as a value, the one decodeBody writes.
func FuzzSpliceBody(f *testing.F) {
	for _, s := range spliceSeeds {
		f.Add([]byte(s), "gpt-4o")
	}
	f.Add([]byte(spliceSeeds[0]), `a"<b>\`)
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		got, ok := spliceBody(body, model)
		if !ok {
			return
		}
		want, err := decodeBody(body, model, continuation{})
		if err != nil {
			t.Fatalf("spliced %q, which decodeBody refuses: %v", body, err)
		}
		if g, w := decodeAny(t, got), decodeAny(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("%q: spliced %s\ndecoded %s", body, got, want)
		}
	})
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		t.Fatalf("%s is not one JSON value: %v", b, err)
	}
	return v
}

// TestSpliceBodyTakesTheCommonBodies: the bodies clients send are written
// in one pass, not decoded.
func TestSpliceBodyTakesTheCommonBodies(t *testing.T) {
	for _, s := range []string{spliceSeeds[0], spliceSeeds[1], spliceSeeds[7], spliceSeeds[13], spliceSeeds[14],
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function"}]}`,
	} {
		if _, ok := spliceBody([]byte(s), "m"); !ok {
			t.Errorf("left to decodeBody: %s", s)
		}
	}
}

// FuzzScanLimits holds tokenLimit's one pass to encoding/json.
func FuzzScanLimits(f *testing.F) {
	for _, s := range []string{`{"max_tokens":10}`, `{"max_tokens":10,"max_tokens":null}`, `{"max_completion_tokens":1e3,"max_tokens":"5"}`, `{"max_tokens":-0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := scanLimits(body)
		if !ok {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("scanned %q, which encoding/json refuses: %v", body, err)
		}
		for i, f := range tokenLimitFields {
			if !bytes.Equal(got[i], m[f]) {
				t.Fatalf("%q: %s is %q, encoding/json %q", body, f, got[i], m[f])
			}
		}
	})
}

// BenchmarkUpstreamBody writes a fresh answer's provider body with
// encoding/json (decodeBody) and in one pass (upstreamBody), for a first
// turn and a conversation of 21 messages, and finds its token limit.
//
//	go test -run '^$' -bench 'UpstreamBody|TokenLimit' -benchmem ./relay/worker/
func BenchmarkUpstreamBody(b *testing.B) {
	for _, turns := range []int{1, 21} {
		body := json.RawMessage(relaytest.Conversation("gpt-test", turns))
		for _, c := range []struct {
			name  string
			write func(json.RawMessage, string, continuation) ([]byte, error)
		}{{"encoding-json", decodeBody}, {"one-pass", upstreamBody}} {
			b.Run(fmt.Sprintf("%d-messages/%s", turns, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, err := c.write(body, "gpt-4o-mini-2024-07-18", continuation{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkTokenLimit finds a conversation's token limit.
func BenchmarkTokenLimit(b *testing.B) {
	body := json.RawMessage(relaytest.Conversation("gpt-test", 21))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if n, ok := tokenLimit(body); !ok || n != 50 {
			b.Fatal(n, ok)
		}
	}
}
