package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// What the passthrough frames hold, as a provider sent it.
const (
	ptLogprobs1   = `{"content":[{"token":"Hel","logprob":-0.25,"bytes":[72,101,108],"top_logprobs":[{"token":"Hel","logprob":-0.25,"bytes":[72,101,108]}]}],"refusal":null}`
	ptLogprobs2   = `{"content":[{"token":"lo","logprob":-1.5,"bytes":[108,111],"top_logprobs":[]}],"refusal":null}`
	ptAnnotations = `[{"type":"url_citation","url_citation":{"end_index":3,"start_index":0,"title":"T","url":"https://example.com/"}}]`
	ptDetailsIn   = `{"cached_tokens":2,"audio_tokens":0}`
	ptDetailsOut  = `{"reasoning_tokens":4,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}`
)

// passthroughFrames is a stream whose chunks hold every field a provider's
// chunk can bring: reasoning, then text with logprobs, annotations and
// unknown members, then text after a seam whose logprobs have a gap.
func passthroughFrames(t *testing.T) []wire.Frame {
	var usage wire.Usage
	if err := json.Unmarshal([]byte(`{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14,"prompt_tokens_details":`+ptDetailsIn+
		`,"completion_tokens_details":`+ptDetailsOut+`}`), &usage); err != nil {
		t.Fatal(err)
	}
	return []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Reasoning: "Think.", SystemFingerprint: "fp_a", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Seq: 2, Content: "Hel", Logprobs: json.RawMessage(ptLogprobs1), Annotations: json.RawMessage(ptAnnotations),
			SystemFingerprint: "fp_a", ChunkExtra: json.RawMessage(`{"service_tier":"default"}`), ChoiceExtra: json.RawMessage(`{"stop_reason":null}`),
			DeltaExtra: json.RawMessage(`{"x_future":{"a":[1,2]}}`), Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Seq: 3, Content: "lo", Logprobs: json.RawMessage(ptLogprobs2), LogprobsGap: true, SystemFingerprint: "fp_b",
			Provider: "alpha", Model: testModel, Attempt: 2, Seam: wire.SeamContinuation},
		{Kind: wire.KindEnd, Seq: 4, Status: wire.StatusDone, FinishReason: "stop", Attempts: 2, Usage: &usage},
	}
}

// members decodes a JSON object into its raw members.
func members(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

// path follows member names through nested objects (and indexes, such
// as "0", into arrays) and returns the raw value found.
func path(t *testing.T, raw []byte, names ...string) string {
	t.Helper()
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil {
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil || len(a) <= i {
				t.Fatalf("%s is not an array with an element %d", raw, i)
			}
			raw = a[i]
			continue
		}
		raw = members(t, raw)[n]
	}
	return string(raw)
}

func TestChatChunksCarryEveryField(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, passthroughFrames(t))
	var data [][]byte
	for _, ev := range parseSSE(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+fixedID, "", nil))) {
		if ev.ID != "" {
			data = append(data, []byte(ev.Data))
		}
	}
	if len(data) != 4 {
		t.Fatalf("%d events with an id, want 3 chunks and the final one", len(data))
	}
	for _, c := range []struct {
		chunk int
		path  []string
		want  string
	}{
		{0, []string{"choices", "0", "delta", "reasoning_content"}, `"Think."`},
		{0, []string{"system_fingerprint"}, `"fp_a"`},
		{1, []string{"choices", "0", "logprobs"}, ptLogprobs1},
		{1, []string{"choices", "0", "delta", "annotations"}, ptAnnotations},
		{1, []string{"choices", "0", "delta", "x_future"}, `{"a":[1,2]}`},
		{1, []string{"choices", "0", "stop_reason"}, `null`},
		{1, []string{"service_tier"}, `"default"`},
		{2, []string{"choices", "0", "logprobs"}, ptLogprobs2},
		{2, []string{"system_fingerprint"}, `"fp_b"`},
		{2, []string{"relay", "logprobs_gap"}, `true`},
		{3, []string{"usage", "prompt_tokens_details"}, ptDetailsIn},
		{3, []string{"usage", "completion_tokens_details"}, ptDetailsOut},
	} {
		if got := path(t, data[c.chunk], c.path...); got != c.want {
			t.Errorf("chunk %d %s = %s, want %s", c.chunk, strings.Join(c.path, "."), got, c.want)
		}
	}
	if got := path(t, data[0], "choices", "0", "delta", "content"); got != `""` {
		t.Errorf("reasoning chunk content = %s, want the empty string SDKs expect", got)
	}
}

func TestCompletionCarriesEveryField(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: func(wire.Request) []wire.Frame { return passthroughFrames(t) }})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "all fields"), nil)
	body := []byte(readAll(t, res))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	wantLogprobs := `{"content":[` + path(t, []byte(ptLogprobs1), "content", "0") + `,` + path(t, []byte(ptLogprobs2), "content", "0") + `],"refusal":null}`
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"choices", "0", "message", "content"}, `"Hello"`},
		{[]string{"choices", "0", "message", "reasoning_content"}, `"Think."`},
		{[]string{"choices", "0", "message", "annotations"}, ptAnnotations},
		{[]string{"choices", "0", "logprobs"}, wantLogprobs},
		{[]string{"system_fingerprint"}, `"fp_b"`},
		{[]string{"usage", "prompt_tokens_details"}, ptDetailsIn},
		{[]string{"usage", "completion_tokens_details"}, ptDetailsOut},
		{[]string{"relay", "logprobs_gap"}, `true`},
	} {
		if got := path(t, body, c.path...); got != c.want {
			t.Errorf("%s = %s, want %s", strings.Join(c.path, "."), got, c.want)
		}
	}
}

func TestResponsesCarryReasoningAndLogprobs(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, passthroughFrames(t))
	body := readAll(t, do(t, "GET", edge.url+"/v1/responses/"+responses.ResponseID(fixedID)+"?stream=true", "", nil))
	events := respEvents(t, body)
	checkNumbered(t, events, 0)
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.annotation.added",
		"response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n %s\nwant\n %s", strings.Join(types, " "), strings.Join(want, " "))
	}
	var raw []sseEvent
	for _, ev := range parseSSE(t, body) {
		if ev.Event != "" {
			raw = append(raw, ev)
		}
	}
	if got := path(t, []byte(raw[4].Data), "delta"); got != `"Think."` {
		t.Errorf("reasoning_text.delta = %s", got)
	}
	if got := path(t, []byte(raw[2].Data), "item", "type"); got != `"reasoning"` {
		t.Errorf("first item type = %s", got)
	}
	entry1, entry2 := path(t, []byte(ptLogprobs1), "content", "0"), path(t, []byte(ptLogprobs2), "content", "0")
	if got := path(t, []byte(raw[10].Data), "logprobs"); got != "["+entry1+"]" {
		t.Errorf("output_text.delta logprobs = %s, want [%s]", got, entry1)
	}
	// The chat url_citation in the Responses' shape: its fields beside type.
	wantAnnotation := `{"end_index":3,"start_index":0,"title":"T","type":"url_citation","url":"https://example.com/"}`
	if got := path(t, []byte(raw[11].Data), "annotation"); got != wantAnnotation {
		t.Errorf("annotation = %s, want %s", got, wantAnnotation)
	}
	if got := path(t, []byte(raw[13].Data), "logprobs"); got != "["+entry1+","+entry2+"]" {
		t.Errorf("output_text.done logprobs = %s", got)
	}

	res := do(t, "GET", edge.url+"/v1/responses/"+responses.ResponseID(fixedID), "", nil)
	obj := []byte(readAll(t, res))
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"output", "0", "content", "0", "text"}, `"Think."`},
		{[]string{"output", "0", "summary"}, `[]`},
		{[]string{"usage", "input_tokens_details", "cached_tokens"}, `2`},
		{[]string{"output", "1", "content", "0", "annotations"}, "[" + wantAnnotation + "]"},
		{[]string{"usage", "output_tokens_details", "reasoning_tokens"}, `4`},
	} {
		if got := path(t, obj, c.path...); got != c.want {
			t.Errorf("%s = %s, want %s", strings.Join(c.path, "."), got, c.want)
		}
	}
	var resp struct {
		Output []struct {
			Content []struct {
				Logprobs json.RawMessage `json:"logprobs"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(obj, &resp); err != nil || len(resp.Output) != 2 ||
		!bytes.Equal(resp.Output[1].Content[0].Logprobs, []byte("["+entry1+","+entry2+"]")) {
		t.Errorf("message logprobs in %s (%v)", obj, err)
	}
}

func TestResponsesRefusalIsARefusalPart(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Refusal: "I can't ", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Seq: 2, Refusal: "help with that.", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1},
	})
	body := readAll(t, do(t, "GET", edge.url+"/v1/responses/"+responses.ResponseID(fixedID)+"?stream=true", "", nil))
	var types []string
	var done string
	for _, ev := range parseSSE(t, body) {
		if ev.Event == "" {
			continue
		}
		types = append(types, ev.Event)
		if ev.Event == "response.refusal.done" {
			done = path(t, []byte(ev.Data), "refusal")
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.refusal.delta", "response.refusal.delta", "response.refusal.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") || done != `"I can't help with that."` {
		t.Fatalf("events %v (refusal.done %s), want %v", types, done, want)
	}
	obj := []byte(readAll(t, do(t, "GET", edge.url+"/v1/responses/"+responses.ResponseID(fixedID), "", nil)))
	if got := path(t, obj, "output", "0", "content"); got != `[{"type":"refusal","refusal":"I can't help with that."}]` {
		t.Fatalf("message content = %s", got)
	}
}
