package mockupstream

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"testing"
)

type wireEmbeddings struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeEmbeddings(t *testing.T, resp *http.Response) wireEmbeddings {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out wireEmbeddings
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEmbeddingsAreDeterministicUnitVectors(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(4))
	out := decodeEmbeddings(t, post(t, ts, "/v1/embeddings", "", map[string]any{"model": "mock-1", "input": []string{"a", "b"}, "dimensions": 16}))
	if out.Object != "list" || out.Model != "mock-1" || len(out.Data) != 2 || out.Usage.TotalTokens == 0 {
		t.Fatalf("answer %+v", out)
	}
	for i, in := range []string{"a", "b"} {
		var v []float32
		if err := json.Unmarshal(out.Data[i].Embedding, &v); err != nil {
			t.Fatal(err)
		}
		if out.Data[i].Index != i || !slices.Equal(v, Embedding(in, 16)) {
			t.Fatalf("embedding %d: %v, want Embedding(%q, 16)", i, v, in)
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Fatalf("embedding %d has norm² %v, want 1", i, norm)
		}
	}
	if slices.Equal(Embedding("a", 16), Embedding("b", 16)) {
		t.Fatal("two inputs have the same embedding")
	}
	if got := len(Embedding("a", DefaultDimensions)); got != DefaultDimensions {
		t.Fatalf("%d dimensions", got)
	}
}

func TestEmbeddingsInBase64(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(4))
	out := decodeEmbeddings(t, post(t, ts, "/v1/embeddings", "", map[string]any{"model": "mock-1", "input": "x", "dimensions": 4, "encoding_format": "base64"}))
	var s string
	if err := json.Unmarshal(out.Data[0].Embedding, &s); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	want := Embedding("x", 4)
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != want[i] {
			t.Fatalf("component %d: %v, want %v", i, got, want[i])
		}
	}
}

func TestEmbeddingsHonourFaultsAndChecks(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(4))
	body := map[string]any{"model": "mock-1", "input": "[[mock: status=429, retry_after=2, times=1]] x"}
	resp := post(t, ts, "/v1/embeddings", "", body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("first call: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	decodeEmbeddings(t, post(t, ts, "/v1/embeddings", "", body))
	key := ConversationKey([]Message{{Role: roleUser, Content: "[[mock: status=429, retry_after=2, times=1]] x"}})
	if n := s.Stats().ByConversation[key]; n != 2 {
		t.Fatalf("%d calls counted, want 2", n)
	}
	for _, c := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"model": "nope", "input": "x"}, http.StatusNotFound},
		{map[string]any{"model": "mock-1", "input": []string{}}, http.StatusBadRequest},
		{map[string]any{"model": "mock-1", "input": "x", "dimensions": 0}, http.StatusBadRequest},
		{map[string]any{"model": "mock-1", "input": "x", "encoding_format": "hex"}, http.StatusBadRequest},
	} {
		if resp := post(t, ts, "/v1/embeddings", "", c.body); resp.StatusCode != c.status {
			t.Errorf("%v: status %d, want %d", c.body, resp.StatusCode, c.status)
		}
	}
}
