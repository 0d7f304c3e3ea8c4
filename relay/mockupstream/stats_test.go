package mockupstream

import (
	"encoding/json"
	"net/http"
	"reflect"
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
