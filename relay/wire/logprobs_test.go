package wire

import (
	"encoding/json"
	"testing"
)

func TestMergeLogprobs(t *testing.T) {
	got := MergeLogprobs([]json.RawMessage{
		[]byte(`{"content":null,"refusal":null}`),
		[]byte(`{"content":[{"token":"a"}],"refusal":[],"future":1}`),
		[]byte(`{"content":[{"token":"b"}],"future":2}`),
	})
	if want := `{"content":[{"token":"a"},{"token":"b"}],"refusal":[],"future":2}`; string(got) != want {
		t.Fatalf("merged = %s, want %s", got, want)
	}
	if got := MergeLogprobs([]json.RawMessage{[]byte(`{"content":null}`), []byte(`{"content":null}`)}); string(got) != `{"content":null}` {
		t.Fatalf("merged nulls = %s", got)
	}
}
