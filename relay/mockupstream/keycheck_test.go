package mockupstream

import (
	"encoding/json"
	"maps"
	"net/http"
	"testing"
)

// The relay checks a key with GET /v1/models before it takes traffic: a
// key not accepted is refused in the shape of the client's dialect, and
// the stats tell checks from traffic, by key.
func TestModelsChecksTheKeyInEachDialect(t *testing.T) {
	s, ts := newTestServer(t, Config{Tokens: 2, TokenInterval: -1, APIKeys: []string{"good"}})
	models := func(h http.Header) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := models(http.Header{"Authorization": {"Bearer good"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("good bearer: status %d", resp.StatusCode)
	}
	e := decodeError(t, models(http.Header{"Authorization": {"Bearer bad"}}), http.StatusUnauthorized)
	if e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
		t.Fatalf("bad bearer: error %+v, want OpenAI's invalid_api_key", e)
	}
	anthropic := http.Header{"Anthropic-Version": {"2023-06-01"}, "X-Api-Key": {"bad"}}
	resp := models(anthropic)
	var claude struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&claude); err != nil || resp.StatusCode != http.StatusUnauthorized ||
		claude.Type != "error" || claude.Error.Type != "authentication_error" {
		t.Fatalf("bad x-api-key: status %d, body %+v (%v); want Anthropic's authentication_error", resp.StatusCode, claude, err)
	}
	anthropic.Set("X-Api-Key", "good")
	if resp := models(anthropic); resp.StatusCode != http.StatusOK {
		t.Fatalf("good x-api-key: status %d", resp.StatusCode)
	}
	if resp := post(t, ts, "/v1/chat/completions", "good", chatBody(true, conv("counted"))); resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: status %d", resp.StatusCode)
	}
	st := s.Stats()
	if want := map[string]int{"good": 2, "bad": 2}; !maps.Equal(st.ModelsByKey, want) {
		t.Fatalf("models by key %v, want %v", st.ModelsByKey, want)
	}
	if want := map[string]int{"good": 1}; !maps.Equal(st.ByKey, want) {
		t.Fatalf("traffic by key %v, want %v: checks are not traffic", st.ByKey, want)
	}
}
