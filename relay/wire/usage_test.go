package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestTokenCountsKeepOrderAndSum(t *testing.T) {
	const in = `{"reasoning_tokens":4,"audio_tokens":0,"future_tokens":2,"note":"x","nested":{"a":1}}`
	var a TokenCounts
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"reasoning_tokens":4,"audio_tokens":0,"future_tokens":2}`; string(out) != want {
		t.Fatalf("round trip = %s, want %s (integers kept in order)", out, want)
	}
	b := TokenCounts{{Name: "cached_tokens", N: 1}, {Name: "reasoning_tokens", N: 3}}
	sum := a.Add(b)
	want := TokenCounts{{"reasoning_tokens", 7}, {"audio_tokens", 0}, {"future_tokens", 2}, {"cached_tokens", 1}}
	if !reflect.DeepEqual(sum, want) {
		t.Fatalf("Add = %+v, want %+v", sum, want)
	}
	if a.Get("reasoning_tokens") != 4 || a.Get("missing") != 0 {
		t.Fatalf("Add modified its receiver, or Get is wrong: %+v", a)
	}
	var null TokenCounts
	if err := json.Unmarshal([]byte(`null`), &null); err != nil || null != nil {
		t.Fatalf("null = %+v, %v", null, err)
	}
	if err := json.Unmarshal([]byte(`[1]`), &null); err == nil {
		t.Fatal("an array decoded as token counts")
	}
}
