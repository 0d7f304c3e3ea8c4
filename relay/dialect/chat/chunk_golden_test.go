package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestParseChunkGolden parses a chunk with every member OpenAI's reference
// lists (and the reasoning and unknown members other providers add), and
// checks that each one the relay does not rewrite is kept byte for byte.
func TestParseChunkGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/chunk_openai_full.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseChunk(data)
	if err != nil {
		t.Fatalf("ParseChunk: %v", err)
	}
	var ref struct {
		Model             string          `json:"model"`
		SystemFingerprint string          `json:"system_fingerprint"`
		ServiceTier       json.RawMessage `json:"service_tier"`
		Choices           []struct {
			Delta struct {
				Content     string          `json:"content"`
				Reasoning   string          `json:"reasoning_content"`
				Annotations json.RawMessage `json:"annotations"`
				Audio       json.RawMessage `json:"audio"`
			} `json:"delta"`
			Logprobs   json.RawMessage `json:"logprobs"`
			StopReason json.RawMessage `json:"stop_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     json.RawMessage `json:"prompt_tokens_details"`
			Completion json.RawMessage `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	c := ref.Choices[0]
	if d.Role != "assistant" || d.Content != c.Delta.Content || d.Reasoning != c.Delta.Reasoning || d.Refusal != "" ||
		d.Model != ref.Model || d.SystemFingerprint != ref.SystemFingerprint {
		t.Errorf("text members = %+v", d)
	}
	same := func(what string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s =\n %s\nwant\n %s", what, got, want)
		}
	}
	same("logprobs", d.Logprobs, c.Logprobs)
	same("annotations", d.Annotations, c.Delta.Annotations)
	fields := func(what string, got []Field, name string, want json.RawMessage) {
		t.Helper()
		if len(got) != 1 || got[0].Name != name {
			t.Fatalf("%s = %+v, want only %s", what, got, name)
		}
		same(what+"."+name, got[0].Value, want)
	}
	fields("ChunkExtra", d.ChunkExtra, "service_tier", ref.ServiceTier)
	fields("ChoiceExtra", d.ChoiceExtra, "stop_reason", c.StopReason)
	fields("DeltaExtra", d.DeltaExtra, "audio", c.Delta.Audio)
	for _, u := range []struct {
		what string
		got  any
		want []byte
	}{
		{"prompt_tokens_details", d.Usage.PromptTokensDetails, ref.Usage.Prompt},
		{"completion_tokens_details", d.Usage.CompletionTokensDetails, ref.Usage.Completion},
	} {
		got, err := json.Marshal(u.got)
		if err != nil {
			t.Fatal(err)
		}
		same(u.what, got, u.want)
	}
}
