package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// seedFrames are frames as the relay writes them: a claim, the chunks of
// a chat answer (the first with its role, tool calls, logprobs, citations,
// a provider's unknown members, reasoning), and the end frames of each
// status.
func seedFrames() []Frame {
	return []Frame{
		{Kind: KindClaim, Worker: "worker-7f3a", Tenant: "alpha", Model: "gpt-4o", Created: 1765000000},
		{Kind: KindChunk, Seq: 1, Role: "assistant", Content: "Hello", SystemFingerprint: "fp_44709d6fcb",
			Provider: "openai", Model: "gpt-4o-mini", Attempt: 1, Tokens: 1, UpstreamTTFTMS: 312},
		{Kind: KindChunk, Seq: 2, Content: " world", Provider: "openai", Model: "gpt-4o-mini", Attempt: 1, Tokens: 1},
		{Kind: KindChunk, Seq: 3, Content: "<b>\"x\" & y</b>\\\n\t\u2028\u2029 \U0001F600 caf\u00e9 \x00\x1f\xff\xfe",
			Provider: "p", Model: "m", Attempt: 2, Seam: SeamRetry, Tokens: 4, LogprobsGap: true},
		{Kind: KindChunk, Seq: 4, ToolCalls: json.RawMessage(`[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]`),
			Provider: "openai", Model: "gpt-4o", Attempt: 1},
		{Kind: KindChunk, Seq: 5, Content: " the", Logprobs: json.RawMessage(`{"content":[{"token":" the","logprob":-0.0123,"bytes":[32,116,104,101],"top_logprobs":[]}],"refusal":null}`),
			Provider: "openai", Model: "gpt-4o", Attempt: 1, Tokens: 1},
		{Kind: KindChunk, Seq: 6, Content: "x", Logprobs: json.RawMessage("{ \"content\" : [ {\"token\": \"<&>\u2028\"} ] }"),
			Annotations: json.RawMessage(`[{"type":"url_citation","url_citation":{"url":"https://example.com/?a=1&b=2","title":"Ex"}}]`),
			ChunkExtra:  json.RawMessage(`{"service_tier":"default"}`), ChoiceExtra: json.RawMessage(`{"stop_reason":null}`),
			DeltaExtra: json.RawMessage(`{"audio":{"id":"a1"}}`), Provider: "openai", Model: "gpt-4o", Attempt: 1, Cached: true},
		{Kind: KindChunk, Seq: 7, Reasoning: "Let me think.", ReasoningSignature: "EqQBCgIYAhIM", Provider: "anthropic",
			Model: "claude-sonnet-4", Attempt: 1, Tokens: 3},
		{Kind: KindChunk, Seq: 8, RedactedReasoning: "EmwKAhgBEgy3va3pzix", NewBlock: true, Citations: json.RawMessage(`[{"type":"char_location","cited_text":"x","document_index":0}]`),
			Refusal: "I can't help with that.", Provider: "anthropic", Model: "claude-sonnet-4", Attempt: 3, Seam: SeamFallback},
		{Kind: KindEnd, Seq: 9, Status: StatusDone, FinishReason: "stop", StopSequence: "\n\nHuman:", Attempts: 1, Cost: 0.00042,
			Usage: &Usage{PromptTokens: 12, CompletionTokens: 8, TotalTokens: 20,
				PromptTokensDetails:     TokenCounts{{Name: "cached_tokens", N: 4}, {Name: CacheCreationTokens, N: 0}},
				CompletionTokensDetails: TokenCounts{{Name: "reasoning_tokens", N: 2}},
				ServerToolUse:           TokenCounts{{Name: "web_search_requests", N: 1}}},
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Kind: KindEnd, Seq: 3, Status: StatusIncomplete, Attempts: 4, Cost: 1e-7,
			Error: &Error{Message: "upstream <reset> & gave up", Type: TypeIncomplete, Code: CodeRetriesExhausted, Status: 502}},
		{Kind: KindEnd, Seq: 1, Status: StatusFailed, Attempts: 2, Cost: 1e21,
			Error: &Error{Message: "every provider's breaker is open", Type: TypeUpstream, Code: CodeBreakerOpen, Param: "model", Status: 503, RetryAfterMS: 30000}},
		{Kind: KindEnd, Seq: 4, Status: StatusCancelled, Error: &Error{Message: "cancelled", Type: TypeCancelled}, Cost: -2.5},
	}
}

// Bits of FuzzFrameEncode's mask past the two bits of each string member.
const (
	fuzzStrings    = 16                 // string members, two bits each
	fuzzRawBit     = 2 * fuzzStrings    // 8 bits: which raw members are set
	fuzzRawQuoted  = fuzzRawBit + 8     // raw members are raw as a JSON string
	fuzzBoolBit    = fuzzRawQuoted + 1  // 3 bits: the booleans
	fuzzIntBit     = fuzzBoolBit + 3    // 5 bits: which numbers are set
	fuzzErrorBit   = fuzzIntBit + 5     // Error is set
	fuzzUsageBit   = fuzzErrorBit + 1   // Usage is set
	fuzzDetailsBit = fuzzUsageBit + 1   // Usage has details
	fuzzCostBit    = fuzzDetailsBit + 1 // Cost is set
	fuzzDataBit    = fuzzCostBit + 1    // Data is set (to raw's bytes)
)

// fuzzFrame builds a frame from FuzzFrameEncode's inputs: mask says which
// members are set and to what.
func fuzzFrame(mask uint64, text, name string, raw []byte, n int64, cost float64) Frame {
	var f Frame
	strs := []*string{(*string)(&f.Kind), &f.Role, &f.Content, &f.Reasoning, &f.ReasoningSignature,
		&f.RedactedReasoning, &f.Refusal, &f.SystemFingerprint, &f.Provider, &f.Model, (*string)(&f.Seam),
		&f.Worker, (*string)(&f.Status), &f.FinishReason, &f.StopSequence, &f.TraceParent}
	for i, s := range strs {
		*s = [4]string{"", text, name, text + name}[mask>>(2*i)&3]
	}
	if mask&(1<<fuzzRawQuoted) != 0 {
		raw, _ = json.Marshal(string(raw))
	}
	raws := []*json.RawMessage{&f.ToolCalls, &f.Logprobs, &f.Annotations, &f.Citations, &f.ChunkExtra, &f.ChoiceExtra, &f.DeltaExtra, &f.Durable}
	for i, r := range raws {
		if mask&(1<<(fuzzRawBit+i)) != 0 {
			*r = raw
		}
	}
	bools := []*bool{&f.LogprobsGap, &f.NewBlock, &f.Cached}
	for i, b := range bools {
		*b = mask&(1<<(fuzzBoolBit+i)) != 0
	}
	set := func(i int) bool { return mask&(1<<(fuzzIntBit+i)) != 0 }
	if set(0) {
		f.Seq = uint64(n)
	}
	if set(1) {
		f.Attempt = int(n % 7)
	}
	if set(2) {
		f.Tokens = int(-n)
	}
	if set(3) {
		f.UpstreamTTFTMS = n
	}
	if set(4) {
		f.Attempts = int(n >> 8)
	}
	if mask&(1<<fuzzErrorBit) != 0 {
		f.Error = &Error{Message: text, Type: name, Code: name + text, Param: text, Status: int(n), RetryAfterMS: -n}
		if n%2 == 0 {
			f.Error.Code, f.Error.Param = "", ""
		}
	}
	if mask&(1<<fuzzUsageBit) != 0 {
		f.Usage = &Usage{PromptTokens: int(n), CompletionTokens: int(n >> 1), TotalTokens: int(n + n>>1)}
		if mask&(1<<fuzzDetailsBit) != 0 {
			f.Usage.PromptTokensDetails = TokenCounts{{Name: name, N: int(n)}, {Name: text}}
			f.Usage.ServerToolUse = TokenCounts{{Name: text + name, N: -1}}
		}
	}
	if mask&(1<<fuzzCostBit) != 0 {
		f.Cost = cost
	}
	if mask&(1<<fuzzDataBit) != 0 {
		f.Data = append([]byte{}, raw...)
	}
	return f
}

// FuzzFrameEncode checks that Encode renders a frame byte for byte as
// json.Marshal does, by hand for every frame json.Marshal accepts, and
// panics for the others as json.Marshal fails.
func FuzzFrameEncode(f *testing.F) {
	f.Add(uint64(0b01), "chunk", "", []byte(nil), int64(0), 0.0)
	f.Add(uint64(0b01_01_01_01_00_01), "\x00<a href=\"&\">\u2028\u2029\xff", "openai", []byte(nil), int64(7), 0.0)
	f.Add(^uint64(0), "caf\u00e9 \U0001F600\n\t\\", "gpt-4o", []byte(`[ {"a" : "<&>\u2028", "b":[1, 2.5e-3, true, null]} ]`), int64(1<<40), 1e-7)
	f.Add(uint64(1)<<fuzzRawBit|1<<fuzzRawQuoted|0b10, "end", "done", []byte("\x7f\u2029 raw & text"), int64(-3), math.Copysign(0, -1))
	f.Add(uint64(1)<<(fuzzRawBit+1)|0b11, "end", "", []byte(`{"content": [`), int64(1), 0.0)
	f.Add(uint64(1)<<fuzzCostBit|1<<fuzzUsageBit|1<<fuzzDetailsBit|1<<fuzzErrorBit|0b10, "x", "end", []byte(nil), int64(-9), math.Inf(1))
	f.Add(uint64(1)<<fuzzCostBit|0b10, "x", "end", []byte(nil), int64(math.MinInt64), 123456789.125)
	f.Fuzz(func(t *testing.T, mask uint64, text, name string, raw []byte, n int64, cost float64) {
		fr := fuzzFrame(mask, text, name, raw, n, cost)
		want, err := json.Marshal(fr)
		if _, byHand := appendFrame(nil, &fr); byHand != (err == nil) {
			t.Fatalf("encoded by hand: %v; encoding/json error: %v", byHand, err)
		}
		if err != nil {
			defer func() {
				if recover() == nil {
					t.Fatalf("Encode did not panic; encoding/json: %v", err)
				}
			}()
			fr.Encode()
			return
		}
		if got := fr.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode:\n%s\nencoding/json:\n%s", got, want)
		}
		if got, ok := appendFrame([]byte("prefix"), &fr); !ok || !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
			t.Fatalf("appended after a prefix:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}

// FuzzDecodeFrame checks that DecodeFrame reads any input as encoding/json
// does: the same frame (nil and empty raw members told apart) and an
// error for the same inputs; and that what it reads by hand, encoding/json
// reads the same.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range seedFrames() {
		f.Add(fr.Encode())
		f.Add(indentJSON(fr))
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"kind":"chunk"} `, " \t\r\n{ \"kind\" : \"end\" , \"seq\" : 3 }\n", `{"kind":"chunk"}x`, `{"kind":"chunk",}`,
		`{"kind":"other"}`, `{"Kind":"chunk"}`, `{"KIND":"claim","SEQ":2}`, `{"kind":"chunk","unknown":1}`, `{"kind":"chunk","\u0073eq":2}`,
		`{"kind":"chunk","seq":1,"seq":2}`, `{"kind":"chunk","content":"a","content":null}`, `{"kind":null}`, `{"kind":"chunk","seq":null}`,
		`{"kind":"chunk","seq":-0}`, `{"kind":"chunk","attempt":-0}`, `{"kind":"chunk","seq":1.0}`, `{"kind":"chunk","seq":1e2}`, `{"kind":"chunk","seq":01}`,
		`{"kind":"chunk","seq":18446744073709551615}`, `{"kind":"chunk","seq":18446744073709551616}`, `{"kind":"chunk","attempt":-9223372036854775809}`,
		`{"kind":"end","cost":1e400}`, `{"kind":"end","cost":-1.5E-3}`, `{"kind":"end","cost":1.}`, `{"kind":"end","cost":"1"}`, `{"kind":"chunk","seq":"1"}`,
		`{"kind":"chunk","cached":true,"new_block":false,"logprobs_gap":null}`, `{"kind":"chunk","cached":1}`, `{"kind":"chunk","content":5}`,
		`{"kind":"chunk","content":"\ud83d\ude00 \ud83d \ude00 \ud83dx \ud83d\u0041 \u00e9\/\b\f\n\r\t\"\\"}`, `{"kind":"chunk","content":"\x"}`,
		`{"kind":"chunk","content":"\u12"}`, "{\"kind\":\"chunk\",\"content\":\"a\x01b\"}", "{\"kind\":\"chunk\",\"content\":\"\xff\xfe\xe2\x82 ok\"}",
		`{"kind":"chunk","tool_calls":null}`, `{"kind":"chunk","tool_calls":[]}`, `{"kind":"chunk","tool_calls":"x"}`, `{"kind":"chunk","logprobs":1.5}`,
		`{"kind":"chunk","tool_calls":[1 2]}`, `{"kind":"chunk","tool_calls":[{"a":}]}`, `{"kind":"chunk","annotations":{"a":[{"b":{"c":[[[]]]}}], "\u00e9": "\ud800"}}`,
		`{"kind":"chunk","tool_calls":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"kind":"end","error":null}`, `{"kind":"end","error":{}}`, `{"kind":"end","error":{"message":"a"},"error":{"type":"b"}}`, `{"kind":"end","error":{"Message":"a"}}`,
		`{"kind":"end","error":{"http_status":502,"retry_after_ms":1.5}}`, `{"kind":"end","error":[]}`,
		`{"kind":"end","usage":{"prompt_tokens":1,"prompt_tokens_details":{"a":1,"b":1.5,"c":"2","d":null,"e":{"x":1},"f":-0,"\u0067":2,"a":3}}}`,
		`{"kind":"end","usage":{"completion_tokens_details":null,"server_tool_use":{}}}`, `{"kind":"end","usage":{"server_tool_use":[]}}`,
		`{"kind":"end","usage":{"prompt_tokens_details":{"a":99999999999999999999}},"usage":{"total_tokens":3}}`, `{"kind":"end","usage":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := DecodeFrame(data)
		want, wantErr := decodeJSON(data)
		if wantErr == nil {
			want, wantErr = checkKind(want)
		}
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeFrame(%q) = %#v, %v\nencoding/json: %#v, %v", data, got, gotErr, want, wantErr)
		}
		if byHand, ok := decodeCommon(data); ok {
			if want, err := decodeJSON(data); err != nil || !reflect.DeepEqual(byHand, want) {
				t.Fatalf("read by hand %q: %#v\nencoding/json: %#v, %v", data, byHand, want, err)
			}
		}
	})
}

// indentJSON renders f as encoding/json does with indentation: what the
// relay never writes, so read with encoding/json's whitespace rules.
func indentJSON(f Frame) []byte {
	b, err := json.MarshalIndent(f, "", "\t")
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeFrameByHand checks that the frames the relay writes are read
// by hand, not left to encoding/json.
func TestDecodeFrameByHand(t *testing.T) {
	for _, f := range seedFrames() {
		for _, data := range [][]byte{f.Encode(), indentJSON(f)} {
			got, ok := decodeCommon(data)
			want, err := decodeJSON(data)
			if !ok || err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("read by hand: %v\n%s\n%#v\nencoding/json: %#v, %v", ok, data, got, want, err)
			}
		}
	}
}

// TestFrameEncodeKnowsEveryField fails when a member is added to a frame:
// frame_encode.go renders each member by hand and must learn the new one
// (FuzzFrameEncode then checks it, once fuzzFrame sets it). frame_decode.go
// would read it with encoding/json, correct but slow.
func TestFrameEncodeKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{Frame{}, []string{"kind", "seq", "role", "content", "data", "tool_calls", "reasoning", "reasoning_signature",
			"redacted_reasoning", "refusal", "logprobs", "logprobs_gap", "annotations", "citations", "new_block",
			"system_fingerprint", "chunk_extra", "choice_extra", "delta_extra", "provider", "model", "attempt", "seam",
			"tokens", "upstream_ttft_ms", "cached", "worker", "tenant", "created", "status", "finish_reason", "stop_sequence", "error",
			"usage", "cost", "attempts", "traceparent", "durable"}},
		{Error{}, []string{"message", "type", "code", "param", "http_status", "retry_after_ms"}},
		{Usage{}, []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
			"completion_tokens_details", "server_tool_use"}},
	} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for f := range typ.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "-" {
				got = append(got, name)
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s has members %v; frame_encode.go knows %v", typ, got, c.want)
		}
	}
}
