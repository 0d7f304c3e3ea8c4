package mockupstream

import (
	"net/http"
	"testing"
)

func TestAPIKeysAndRotation(t *testing.T) {
	s, ts := newTestServer(t, Config{Tokens: 3, TokenInterval: -1, APIKeys: []string{"k1"}})
	chat := func(key string) *http.Response {
		return post(t, ts, "/v1/chat/completions", key, chatBody(true, conv("auth")))
	}
	for _, key := range []string{"", "wrong"} {
		e := decodeError(t, chat(key), http.StatusUnauthorized)
		if e.Error.Code == nil || *e.Error.Code != "invalid_api_key" || e.Error.Type != "invalid_request_error" {
			t.Fatalf("key %q: error %+v", key, e)
		}
	}
	if resp := chat("k1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("k1: status %d", resp.StatusCode)
	}

	s.SetAPIKeys([]string{"k2", "k3"})
	decodeError(t, chat("k1"), http.StatusUnauthorized)
	for _, key := range []string{"k2", "k3"} {
		if resp := chat(key); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s after rotation: status %d", key, resp.StatusCode)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decodeError(t, resp, http.StatusUnauthorized)

	s.SetAPIKeys(nil)
	if resp := chat(""); resp.StatusCode != http.StatusOK {
		t.Fatalf("no keys: status %d, want authentication off", resp.StatusCode)
	}
	// Rejected requests are counted, but not as part of a conversation.
	st := s.Stats()
	if st.ChatRequests != 7 || st.ByStatus[http.StatusUnauthorized] != 3 || st.ByConversation[ConversationKey(conv("auth"))] != 4 {
		t.Fatalf("stats = %+v", st)
	}
}
