package worker

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// takeAll closes p and returns every frame it would publish.
func takeAll(t *testing.T, p *publisher) []wire.Frame {
	t.Helper()
	p.close()
	var fs []wire.Frame
	for {
		f, ok, _ := p.take()
		if !ok {
			return fs
		}
		fs = append(fs, f)
	}
}

func mustAdd(t *testing.T, p *publisher, ds ...chat.Delta) {
	t.Helper()
	for _, d := range ds {
		if err := p.add(&d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPublisherMergesEveryField(t *testing.T) {
	p := newPublisher(nil, wire.Frame{Provider: "p", Model: "m", Attempt: 1}, "")
	lp := func(tok string) json.RawMessage {
		return json.RawMessage(`{"content":[{"token":"` + tok + `","logprob":-0.5,"bytes":null,"top_logprobs":[]}],"refusal":null}`)
	}
	mustAdd(t, p,
		chat.Delta{Reasoning: "Think", SystemFingerprint: "fp_1"},
		chat.Delta{Reasoning: "ing.", SystemFingerprint: "fp_1", ChoiceExtra: []chat.Field{{Name: "stop_reason", Value: []byte("null")}}},
		chat.Delta{Content: "Hel", Logprobs: lp("Hel"), Annotations: []byte(`[{"type":"url_citation"}]`), SystemFingerprint: "fp_1",
			ChoiceExtra: []chat.Field{{Name: "stop_reason", Value: []byte("null")}}},
		chat.Delta{Content: "lo", Logprobs: lp("lo"), Annotations: []byte(`[{"type":"other"}]`)},
	)
	fs := takeAll(t, p)
	if len(fs) != 1 {
		t.Fatalf("got %d frames, want 1: %+v", len(fs), fs)
	}
	f := fs[0]
	if f.Reasoning != "Thinking." || f.Content != "Hello" || f.Tokens != 2 || f.SystemFingerprint != "fp_1" {
		t.Errorf("frame = %+v", f)
	}
	wantLP := `{"content":[{"token":"Hel","logprob":-0.5,"bytes":null,"top_logprobs":[]},{"token":"lo","logprob":-0.5,"bytes":null,"top_logprobs":[]}],"refusal":null}`
	if string(f.Logprobs) != wantLP {
		t.Errorf("logprobs =\n %s\nwant\n %s", f.Logprobs, wantLP)
	}
	if string(f.Annotations) != `[{"type":"url_citation"},{"type":"other"}]` || string(f.ChoiceExtra) != `{"stop_reason":null}` {
		t.Errorf("annotations %s, choice extra %s", f.Annotations, f.ChoiceExtra)
	}
}

func TestPublisherKeepsOneDeltasLogprobsAsSent(t *testing.T) {
	p := newPublisher(nil, wire.Frame{}, "")
	raw := json.RawMessage(`{"content": [ {"token":"a","logprob":-1,"bytes":[97],"top_logprobs":[{"token":"a","logprob":-1,"bytes":[97]}]} ], "refusal": null}`)
	mustAdd(t, p, chat.Delta{Content: "a", Logprobs: raw})
	if fs := takeAll(t, p); len(fs) != 1 || string(fs[0].Logprobs) != string(raw) {
		t.Fatalf("frames = %+v", fs)
	}
}

func TestPublisherKeepsOrderAndUnknownValuesApart(t *testing.T) {
	extra := func(v string) []chat.Field { return []chat.Field{{Name: "x_phase", Value: []byte(v)}} }
	p := newPublisher(nil, wire.Frame{}, "")
	mustAdd(t, p,
		chat.Delta{Content: "a", DeltaExtra: extra(`1`)},
		chat.Delta{Content: "b", DeltaExtra: extra(`1`)},
		chat.Delta{Content: "c", DeltaExtra: extra(`2`)},
		chat.Delta{Reasoning: "r"},
		chat.Delta{ToolCalls: []byte(`[{"index":0}]`)},
		chat.Delta{Content: "d", SystemFingerprint: "fp_1"},
		chat.Delta{SystemFingerprint: "fp_2"},
		chat.Delta{SystemFingerprint: "fp_3"},
		chat.Delta{ChunkExtra: []chat.Field{{Name: "service_tier", Value: []byte(`"flex"`)}}},
	)
	fs := takeAll(t, p)
	type got struct{ content, reasoning, tools, extra, chunkExtra, fp string }
	var gots []got
	for _, f := range fs {
		gots = append(gots, got{f.Content, f.Reasoning, string(f.ToolCalls), string(f.DeltaExtra), string(f.ChunkExtra), f.SystemFingerprint})
	}
	want := []got{
		{content: "ab", extra: `{"x_phase":1}`},
		{content: "c", extra: `{"x_phase":2}`},
		{reasoning: "r", tools: `[{"index":0}]`},
		{content: "d", fp: "fp_1"},
		// fp_2 alone was dropped; the unknown member without data waited
		// for the end of the attempt.
		{chunkExtra: `{"service_tier":"flex"}`, fp: "fp_3"},
	}
	if !reflect.DeepEqual(gots, want) {
		t.Fatalf("frames =\n %+v\nwant\n %+v", gots, want)
	}
}

func TestPublisherCutsLongTextLogprobsLast(t *testing.T) {
	p := newPublisher(nil, wire.Frame{}, "")
	long := strings.Repeat("x", maxChunkContent)
	mustAdd(t, p, chat.Delta{Reasoning: long[:maxChunkContent-10]}, chat.Delta{Content: long, Logprobs: []byte(`{"content":[]}`)})
	p.markLogprobsGap()
	fs := takeAll(t, p)
	if len(fs) != 2 {
		t.Fatalf("got %d frames, want 2", len(fs))
	}
	if len(fs[0].Reasoning) != maxChunkContent-10 || len(fs[0].Content) != 10 || fs[0].Logprobs != nil || fs[0].Tokens != 1 {
		t.Errorf("first piece: %d reasoning, %d text, logprobs %s, tokens %d", len(fs[0].Reasoning), len(fs[0].Content), fs[0].Logprobs, fs[0].Tokens)
	}
	if len(fs[1].Content) != maxChunkContent-10 || string(fs[1].Logprobs) != `{"content":[]}` || !fs[1].LogprobsGap {
		t.Errorf("last piece: %d text, logprobs %s, gap %v", len(fs[1].Content), fs[1].Logprobs, fs[1].LogprobsGap)
	}
}

// A member every chunk repeats (OpenAI's service_tier) makes no chunk of
// its own at the end of an attempt; a new value (vLLM's stop_reason on
// the last chunk) does.
func TestPublisherPublishesOnlyNewsWithoutData(t *testing.T) {
	tier := []chat.Field{{Name: "service_tier", Value: []byte(`"default"`)}}
	stop := func(v string) []chat.Field { return []chat.Field{{Name: "stop_reason", Value: []byte(v)}} }
	p := newPublisher(nil, wire.Frame{}, "")
	mustAdd(t, p, chat.Delta{Content: "a", ChunkExtra: tier, ChoiceExtra: stop("null")})
	if f, ok, _ := p.take(); !ok || f.Content != "a" {
		t.Fatalf("first chunk = %+v, %v", f, ok)
	}
	mustAdd(t, p,
		chat.Delta{Content: "b", ChunkExtra: tier, ChoiceExtra: stop("null")},
		chat.Delta{FinishReason: "stop", ChunkExtra: tier, ChoiceExtra: stop(`"</s>"`)},
		chat.Delta{ChunkExtra: tier, SystemFingerprint: "fp"},
	)
	fs := takeAll(t, p)
	if len(fs) != 2 || fs[0].Content != "b" || string(fs[1].ChoiceExtra) != `{"stop_reason":"</s>"}` {
		t.Fatalf("frames = %+v, want b and the new stop_reason alone", fs)
	}
}

// Logprobs that pile up behind a slow publish are spread over chunks of at
// most maxChunkAttached bytes besides their text.
func TestPublisherBoundsWhatRidesWithTheText(t *testing.T) {
	p := newPublisher(nil, wire.Frame{}, "")
	entry := json.RawMessage(`{"content":[{"token":"t","logprob":-1,"bytes":[116],"top_logprobs":[` + strings.Repeat(`{"token":"x","logprob":-2},`, 200) + `{}]}]}`)
	n := 3 * maxChunkAttached / len(entry)
	for range n {
		mustAdd(t, p, chat.Delta{Content: "t", Logprobs: entry})
	}
	fs := takeAll(t, p)
	var text strings.Builder
	for _, f := range fs {
		if len(f.Logprobs) > maxChunkAttached+len(entry) {
			t.Fatalf("a chunk carries %d bytes of logprobs", len(f.Logprobs))
		}
		if logprobTokens(t, f.Logprobs) != f.Content {
			t.Fatalf("chunk logprobs do not describe its text %q", f.Content)
		}
		text.WriteString(f.Content)
	}
	if len(fs) < 3 || text.Len() != n {
		t.Fatalf("%d chunks with %d bytes of text, want at least 3 with %d", len(fs), text.Len(), n)
	}
}

// TestPublisherKeepsAnthropicBlocksApart: merging never moves a
// signature, a citation or a block boundary across what it belongs to.
func TestPublisherKeepsAnthropicBlocksApart(t *testing.T) {
	p := newPublisher(nil, wire.Frame{}, "")
	cite := func(n string) json.RawMessage {
		return json.RawMessage(`[{"type":"char_location","document_index":` + n + `}]`)
	}
	mustAdd(t, p,
		chat.Delta{Reasoning: "One."},
		chat.Delta{ReasoningSignature: "sig1"},
		chat.Delta{Reasoning: "Two."}, // the next thinking block
		chat.Delta{ReasoningSignature: "sig2"},
		chat.Delta{RedactedReasoning: "opaque"},
		chat.Delta{Content: "Plain "},
		chat.Delta{NewBlock: true},
		chat.Delta{Citations: cite("0")},
		chat.Delta{Content: "cited"},
		chat.Delta{Citations: cite("1")}, // after the text: its own chunk
		chat.Delta{Content: " more"},
	)
	var got []string
	for _, f := range takeAll(t, p) {
		got = append(got, fmt.Sprintf("%q %q %q %q %s %v", f.Reasoning, f.ReasoningSignature, f.RedactedReasoning, f.Content, f.Citations, f.NewBlock))
	}
	want := []string{
		`"One." "sig1" "" ""  false`,
		`"Two." "sig2" "" ""  false`,
		`"" "" "opaque" ""  false`,
		`"" "" "" "Plain "  false`,
		`"" "" "" "cited" [{"type":"char_location","document_index":0}] true`,
		`"" "" "" " more" [{"type":"char_location","document_index":1}] false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("frames:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
