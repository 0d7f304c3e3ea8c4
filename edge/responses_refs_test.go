package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/dialect/chat"
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

// referencedAnswer asks edge for an answer of 48 KB (bigAnswer) and
// returns the id of its message item.
func referencedAnswer(t *testing.T, e *env, edge *testEdge) string {
	t.Helper()
	w := e.startWorker(&worker{script: bigAnswer(250)})
	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(""), bearerHeader(keyAcme))
	first := decodeResponse(t, res)
	if res.StatusCode != http.StatusOK || len(first.Output) != 1 || first.Output[0].Type != "message" {
		t.Fatalf("first answer: %d %+v", res.StatusCode, first)
	}
	<-w.reqs
	return first.Output[0].ID
}

// repeatedReference is a Responses body whose input is a user message
// and n references to id.
func repeatedReference(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":%q,"input":[{"role":"user","content":"hi"}`, testModel)
	for range n {
		fmt.Fprintf(&b, `,{"type":"item_reference","id":%q}`, id)
	}
	b.WriteString("]}")
	return b.String()
}

// streamReads subscribes to the direct gets sent to the chunk log and
// returns a function that says, since it was last called, how many were
// sent and how many of them began a read of a stream (Reader.Read asks
// for the stream's last frame first).
func streamReads(t *testing.T, e *env) func() (gets, reads int) {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("$JS.API.DIRECT.GET.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() (gets, reads int) {
		t.Helper()
		// The server passed each request on before it answered it, and
		// passes on this connection's PING after them.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := sub.NextMsg(0)
			if err != nil {
				return gets, reads
			}
			if strings.HasPrefix(msg.Subject, "$JS.API.DIRECT.GET.KV_") {
				continue
			}
			gets++
			if bytes.Contains(msg.Data, []byte(`"last_by_subj"`)) {
				reads++
			}
		}
	}
}

// allocBound is what a refused request may allocate, the client's side
// and the test's NATS server included.
const allocBound = 8 << 20

// allocated is how many bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestResponsesReferencesCountedBeforeExpansion: a body of 140 KB that
// repeats one reference to a 48 KB answer 2,000 times (96 MB resolved) is
// refused for the message cap before any reference is resolved: the 400
// names the input, nothing is read from the log, and the request
// allocates a small part of what its expansion would.
func TestResponsesReferencesCountedBeforeExpansion(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(tenantConfig())
	ref := referencedAnswer(t, e, edge)
	body := repeatedReference(ref, 2000)
	gets := streamReads(t, e)

	var res *http.Response
	var got chat.Error
	alloc := allocated(func() {
		res = do(t, "POST", edge.url+"/v1/responses", body, bearerHeader(keyAcme))
		got = decodeError(t, res)
	})
	t.Logf("a body of %d bytes allocated %d bytes", len(body), alloc)
	if res.StatusCode != http.StatusBadRequest || got.Code != CodeLimitExceeded || got.Param != "input" {
		t.Fatalf("over the cap by reference: %d %+v", res.StatusCode, got)
	}
	if n, _ := gets(); n != 0 {
		t.Errorf("%d gets from the chunk log for a request refused by its count", n)
	}
	if alloc > allocBound {
		t.Errorf("the refused request allocated %d bytes, want under %d (its expansion is %d)", alloc, allocBound, 2000*48<<10)
	}
}

// TestResponsesExpandedBodyIsBounded: references within the message cap
// whose items would make the body larger than edge.max_body_bytes are a
// 413 naming the input item where the bound is crossed; the stream they
// name is read once, and fewer references to it go through.
func TestResponsesExpandedBodyIsBounded(t *testing.T) {
	e := newEnv(t)
	cfg := tenantConfig()
	cfg.MaxBodyBytes = 256 << 10
	edge := e.startEdge(cfg)
	ref := referencedAnswer(t, e, edge)
	gets := streamReads(t, e)

	var res *http.Response
	var got chat.Error
	alloc := allocated(func() {
		res = do(t, "POST", edge.url+"/v1/responses", repeatedReference(ref, 200), bearerHeader(keyAcme))
		got = decodeError(t, res)
	})
	t.Logf("200 references to 48 KB allocated %d bytes", alloc)
	if res.StatusCode != http.StatusRequestEntityTooLarge || got.Code != CodeBodyTooLarge || got.Param != "input[6]" {
		t.Fatalf("expanded past max_body_bytes: %d %+v", res.StatusCode, got)
	}
	if _, reads := gets(); reads != 1 {
		t.Errorf("the referenced stream was read %d times, want once", reads)
	}
	if alloc > allocBound {
		t.Errorf("the refused request allocated %d bytes, want under %d", alloc, allocBound)
	}

	res = do(t, "POST", edge.url+"/v1/responses", repeatedReference(ref, 4), bearerHeader(keyAcme))
	if r := decodeResponse(t, res); res.StatusCode != http.StatusOK || r.Status != "completed" {
		t.Fatalf("within the bound: %d %+v", res.StatusCode, r)
	}
}
