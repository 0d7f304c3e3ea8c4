package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// TestPreviousResponseChain: three responses chained by
// previous_response_id; the provider gets the whole conversation each
// time (each input and each answer, in order, but only the last
// request's instructions), and another tenant, an unknown id or a
// response not stored get OpenAI's previous_response_not_found.
func TestPreviousResponseChain(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2)})
	edge := e.startEdge(tenantConfig())
	acme := bearerHeader(keyAcme)

	post := func(body string, h http.Header) (string, *http.Response) {
		t.Helper()
		res := do(t, "POST", edge.url+"/v1/responses", body, h)
		r := decodeResponse(t, res)
		return r.ID, res
	}
	first, _ := post(fmt.Sprintf(`{"model":%q,"instructions":"be brief","input":"one"}`, testModel), acme)
	<-w.reqs
	second, _ := post(fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"two"}`, testModel, first), acme)
	<-w.reqs
	third, res := post(fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"instructions":"be kind","input":[{"role":"user","content":"three"}]}`, testModel, second), acme)
	if res.StatusCode != http.StatusOK || third == "" {
		t.Fatalf("third response: %d", res.StatusCode)
	}
	var got struct{ Messages []chat.Message }
	if err := json.Unmarshal((<-w.reqs).Body, &got); err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, m := range got.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var parts []struct{ Text string }
			json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		turns = append(turns, m.Role+":"+text)
	}
	if want := "system:be kind|user:one|assistant:w1 w2 |user:two|assistant:w1 w2 |user:three"; strings.Join(turns, "|") != want {
		t.Fatalf("the provider got %v\nwant %s", turns, want)
	}

	for _, tc := range []struct {
		name, body string
		h          http.Header
	}{
		{"another tenant's", fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"x"}`, otherModel, first), bearerHeader(keyBeta)},
		{"unknown", fmt.Sprintf(`{"model":%q,"previous_response_id":"resp_%s","input":"x"}`, testModel, wire.NewStreamID()), acme},
		{"not a response id", fmt.Sprintf(`{"model":%q,"previous_response_id":"nope","input":"x"}`, testModel), acme},
	} {
		res := do(t, "POST", edge.url+"/v1/responses", tc.body, tc.h)
		if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Code != CodePreviousResponseNotFound || got.Param != "previous_response_id" {
			t.Errorf("%s: %d %+v", tc.name, res.StatusCode, got)
		}
	}

	unstored, _ := post(fmt.Sprintf(`{"model":%q,"store":false,"input":"secret"}`, testModel), acme)
	<-w.reqs
	res = do(t, "POST", edge.url+"/v1/responses", fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"x"}`, testModel, unstored), acme)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Code != CodePreviousResponseNotFound {
		t.Errorf("a response not stored: %d %+v", res.StatusCode, got)
	}
}

// TestPreviousResponseRefusals: a response still generating, and one
// whose conversation was too large to keep, are refused with a 400 that
// says so, never followed with part of the conversation.
func TestPreviousResponseRefusals(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	w := e.startWorker(&worker{script: answer(2), gate: gate})
	edge := e.startEdge(Config{})
	h := http.Header{"Content-Type": {"application/json"}}

	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"background":true`), h)
	running := decodeResponse(t, res).ID
	<-w.reqs
	gate <- struct{}{} // the first chunk: in progress
	res = do(t, "POST", edge.url+"/v1/responses", fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"x"}`, testModel, running), h)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Code != CodePreviousResponseInProgress {
		t.Errorf("in progress: %d %+v", res.StatusCode, got)
	}
	close(gate)

	sid := strings.TrimPrefix(running, "resp_")
	big := json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("x", int(e.nc.MaxPayload()))))
	edge.keepConversation(context.Background(), "", sid, []json.RawMessage{big})
	waitFor(t, func() bool {
		res := do(t, "GET", edge.url+"/v1/responses/"+running, "", nil)
		return decodeResponse(t, res).Status == "completed"
	})
	res = do(t, "POST", edge.url+"/v1/responses", fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"x"}`, testModel, running), h)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Code != CodePreviousResponseTooLarge {
		t.Errorf("too large: %d %+v", res.StatusCode, got)
	}
}
