package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestResponsesItemReferencesResolve: a conversation that sends an
// earlier answer back as {"type": "item_reference"}, as the AI SDK does,
// reaches the provider with that answer's text as the assistant's turn; a
// reference the relay cannot resolve, or another tenant's, is a 400 that
// names the item, and nothing is queued.
func TestResponsesItemReferencesResolve(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(3)})
	edge := e.startEdge(tenantConfig())

	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(""), bearerHeader(keyAcme))
	first := decodeResponse(t, res)
	if res.StatusCode != http.StatusOK || len(first.Output) != 1 || first.Output[0].Type != "message" {
		t.Fatalf("first answer: %d %+v", res.StatusCode, first)
	}
	<-w.reqs
	ref := first.Output[0].ID
	body := fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":"hi"},{"type":"item_reference","id":%q},{"role":"user","content":"and then?"}]}`, testModel, ref)
	res = do(t, "POST", edge.url+"/v1/responses", body, bearerHeader(keyAcme))
	if r := decodeResponse(t, res); res.StatusCode != http.StatusOK || r.Status != "completed" {
		t.Fatalf("second answer: %d %+v", res.StatusCode, r)
	}
	var queued struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	req := <-w.reqs
	if err := json.Unmarshal(req.Body, &queued); err != nil {
		t.Fatal(err)
	}
	if len(queued.Messages) != 3 || queued.Messages[1].Role != "assistant" || queued.Messages[1].Content != words(3) || queued.Messages[2].Content != "and then?" {
		t.Fatalf("queued %s, want the referenced answer %q as the assistant's turn", req.Body, words(3))
	}

	for name, tc := range map[string]struct {
		id     string
		header http.Header
	}{
		"another tenant's":    {ref, bearerHeader(keyBeta)},
		"not the relay's":     {"msg_0123456789abcdef", bearerHeader(keyAcme)},
		"no such item":        {ref[:len(ref)-1] + "7", bearerHeader(keyAcme)},
		"an unknown stream's": {"msg_s" + "aaaaaaaaaaaaaaaaaaaaaaaaaa_0", bearerHeader(keyAcme)},
	} {
		body := fmt.Sprintf(`{"model":%q,"input":[{"type":"item_reference","id":%q}]}`, testModel, tc.id)
		res := do(t, "POST", edge.url+"/v1/responses", body, tc.header)
		if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Code != CodeItemNotFound || got.Param != "input[0].id" {
			t.Errorf("%s reference: %d %+v", name, res.StatusCode, got)
		}
	}
	select {
	case req := <-w.reqs:
		t.Fatalf("a refused request was queued: %s", req.Body)
	default:
	}
}
