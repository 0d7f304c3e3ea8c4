package mockupstream

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestStats(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(3))
	a := conv("[[mock: status=503]]")
	b := conv("b")
	stream(t, ts, chatBody(true, a))
	stream(t, ts, chatBody(true, a))
	stream(t, ts, chatBody(false, with(a, Message{Role: roleAssistant, Content: AnswerText(a, 1)})))
	stream(t, ts, chatBody(true, b))
	stream(t, ts, chatBody(true, b, "model", "nope"))

	want := Stats{
		ChatRequests:   5,
		ByStatus:       map[int]int{200: 3, 503: 1, 404: 1},
		ByConversation: map[string]int{ConversationKey(a): 3, ConversationKey(b): 1},
		ByKey:          map[string]int{"": 5}, // no key sent
		ByProtocol:     map[string]int{"HTTP/1.1": 5},
	}
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}

	resp, err := ts.Client().Get(ts.URL + "/mock/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var served Stats
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mock/stats: status %d, %v", resp.StatusCode, err)
	}
	if !reflect.DeepEqual(served, want) {
		t.Fatalf("GET /mock/stats = %+v, want %+v", served, want)
	}
}

// The traceparent of every traced request is recorded under its
// conversation, in order; an untraced one adds none.
func TestStatsRecordTraceParents(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(2))
	a := conv("traced")
	parents := []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
	}
	for _, tp := range append(parents, "") {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(string(mustMarshal(t, chatBody(false, a)))))
		if err != nil {
			t.Fatal(err)
		}
		if tp != "" {
			req.Header.Set("traceparent", tp)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	st := s.Stats()
	if got := st.TraceParents[ConversationKey(a)]; !reflect.DeepEqual(got, parents) || st.ByConversation[ConversationKey(a)] != 3 {
		t.Errorf("traceparents %v of %d requests; want %v of 3", got, st.ByConversation[ConversationKey(a)], parents)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
