package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// # Frames encoded by hand
//
// A worker encodes every frame it appends, and encoding/json renders one
// by reflection, member by member: under load, a share of the worker's
// processor time that grows with every token. appendFrame writes the same
// bytes by hand (FuzzFrameEncode compares the two, and
// TestFrameEncodeKnowsEveryField fails when a member is added to a frame
// until it is added here).

// appendFrame appends f as json.Marshal renders it and reports true; it
// returns b as it was, and false, for a frame that json.Marshal refuses (a
// cost that is NaN or infinite, a raw member that is not JSON).
func appendFrame(b []byte, f *Frame) ([]byte, bool) {
	e := frameEncoder{b: b}
	e.b = append(e.b, `{"kind":`...)
	e.b = AppendJSONString(e.b, string(f.Kind))
	e.uint(`,"seq":`, f.Seq)
	e.str(`,"role":`, f.Role)
	e.str(`,"content":`, f.Content)
	e.bytes(`,"data":`, f.Data)
	e.raw(`,"tool_calls":`, f.ToolCalls)
	e.str(`,"reasoning":`, f.Reasoning)
	e.str(`,"reasoning_signature":`, f.ReasoningSignature)
	e.str(`,"redacted_reasoning":`, f.RedactedReasoning)
	e.str(`,"refusal":`, f.Refusal)
	e.raw(`,"logprobs":`, f.Logprobs)
	e.bool(`,"logprobs_gap":`, f.LogprobsGap)
	e.raw(`,"annotations":`, f.Annotations)
	e.raw(`,"citations":`, f.Citations)
	e.bool(`,"new_block":`, f.NewBlock)
	e.str(`,"system_fingerprint":`, f.SystemFingerprint)
	e.raw(`,"chunk_extra":`, f.ChunkExtra)
	e.raw(`,"choice_extra":`, f.ChoiceExtra)
	e.raw(`,"delta_extra":`, f.DeltaExtra)
	e.str(`,"provider":`, f.Provider)
	e.str(`,"model":`, f.Model)
	e.int(`,"attempt":`, int64(f.Attempt))
	e.str(`,"seam":`, string(f.Seam))
	e.int(`,"tokens":`, int64(f.Tokens))
	e.int(`,"upstream_ttft_ms":`, f.UpstreamTTFTMS)
	e.bool(`,"cached":`, f.Cached)
	e.str(`,"worker":`, f.Worker)
	e.str(`,"tenant":`, f.Tenant)
	e.int(`,"created":`, f.Created)
	e.str(`,"status":`, string(f.Status))
	e.str(`,"finish_reason":`, f.FinishReason)
	e.str(`,"stop_sequence":`, f.StopSequence)
	if f.Error != nil {
		e.b = append(e.b, `,"error":`...)
		e.errorObject(f.Error)
	}
	if f.Usage != nil {
		e.b = append(e.b, `,"usage":`...)
		e.usageObject(f.Usage)
	}
	e.float(`,"cost":`, f.Cost)
	e.int(`,"attempts":`, int64(f.Attempts))
	e.str(`,"traceparent":`, f.TraceParent)
	e.raw(`,"durable":`, f.Durable)
	if e.refused {
		return b, false
	}
	return append(e.b, '}'), true
}

// encodedSize is about the length of f encoded, so that Encode allocates
// once for most frames.
func encodedSize(f *Frame) int {
	n := 160 + len(f.Content) + len(f.Reasoning) + len(f.ReasoningSignature) + len(f.RedactedReasoning) +
		len(f.Refusal) + len(f.SystemFingerprint) + len(f.Provider) + len(f.Model) + len(f.Worker) + len(f.Tenant) +
		len(f.FinishReason) + len(f.StopSequence) + len(f.TraceParent) +
		len(f.ToolCalls) + len(f.Logprobs) + len(f.Annotations) + len(f.Citations) +
		len(f.ChunkExtra) + len(f.ChoiceExtra) + len(f.DeltaExtra) + len(f.Durable) + base64.StdEncoding.EncodedLen(len(f.Data))
	if f.Error != nil {
		n += 64 + len(f.Error.Message) + len(f.Error.Type) + len(f.Error.Code) + len(f.Error.Param)
	}
	if f.Usage != nil {
		n += 128
	}
	return n + n/8
}

// frameEncoder appends a frame's members; each method appends one member,
// named by key (with its comma and colon), unless its value is empty
// (omitempty). refused records a value that encoding/json refuses.
type frameEncoder struct {
	b       []byte
	refused bool
}

func (e *frameEncoder) str(key, s string) {
	if s != "" {
		e.b = append(e.b, key...)
		e.b = AppendJSONString(e.b, s)
	}
}

// bytes appends b in standard base64, as encoding/json renders a []byte.
func (e *frameEncoder) bytes(key string, b []byte) {
	if len(b) != 0 {
		e.b = append(e.b, key...)
		e.b = append(e.b, '"')
		e.b = base64.StdEncoding.AppendEncode(e.b, b)
		e.b = append(e.b, '"')
	}
}

func (e *frameEncoder) uint(key string, n uint64) {
	if n != 0 {
		e.b = append(e.b, key...)
		e.b = strconv.AppendUint(e.b, n, 10)
	}
}

func (e *frameEncoder) int(key string, n int64) {
	if n != 0 {
		e.b = append(e.b, key...)
		e.b = strconv.AppendInt(e.b, n, 10)
	}
}

func (e *frameEncoder) bool(key string, v bool) {
	if v {
		e.b = append(e.b, key...)
		e.b = append(e.b, "true"...)
	}
}

// float appends a non-zero f; negative zero is empty to encoding/json too.
func (e *frameEncoder) float(key string, f float64) {
	if f == 0 {
		return
	}
	e.b = append(e.b, key...)
	var ok bool
	if e.b, ok = AppendJSONFloat(e.b, f); !ok {
		e.refused = true
	}
}

// raw appends a raw member as encoding/json does: compacted, and with the
// HTML-sensitive characters escaped (AppendJSONChars).
func (e *frameEncoder) raw(key string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	e.b = append(e.b, key...)
	start := len(e.b)
	buf := bytes.NewBuffer(e.b)
	if json.Compact(buf, raw) != nil {
		e.refused = true
		return
	}
	e.b = buf.Bytes()
	if needsHTMLEscape(e.b[start:]) {
		compact := bytes.Clone(e.b[start:])
		buf.Truncate(start)
		json.HTMLEscape(buf, compact)
		e.b = buf.Bytes()
	}
}

// needsHTMLEscape reports whether json.HTMLEscape would change b.
func needsHTMLEscape(b []byte) bool {
	for i, c := range b {
		switch {
		case c == '<' || c == '>' || c == '&':
			return true
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			return true
		}
	}
	return false
}

// errorObject appends err as encoding/json renders an Error.
func (e *frameEncoder) errorObject(err *Error) {
	e.b = append(e.b, `{"message":`...)
	e.b = AppendJSONString(e.b, err.Message)
	e.b = append(e.b, `,"type":`...)
	e.b = AppendJSONString(e.b, err.Type)
	e.str(`,"code":`, err.Code)
	e.str(`,"param":`, err.Param)
	e.int(`,"http_status":`, int64(err.Status))
	e.int(`,"retry_after_ms":`, err.RetryAfterMS)
	e.b = append(e.b, '}')
}

// usageObject appends u as encoding/json renders a Usage.
func (e *frameEncoder) usageObject(u *Usage) {
	e.b = append(e.b, `{"prompt_tokens":`...)
	e.b = strconv.AppendInt(e.b, int64(u.PromptTokens), 10)
	e.b = append(e.b, `,"completion_tokens":`...)
	e.b = strconv.AppendInt(e.b, int64(u.CompletionTokens), 10)
	e.b = append(e.b, `,"total_tokens":`...)
	e.b = strconv.AppendInt(e.b, int64(u.TotalTokens), 10)
	e.counts(`,"prompt_tokens_details":`, u.PromptTokensDetails)
	e.counts(`,"completion_tokens_details":`, u.CompletionTokensDetails)
	e.counts(`,"server_tool_use":`, u.ServerToolUse)
	e.b = append(e.b, '}')
}

// counts appends c as TokenCounts.MarshalJSON renders it.
func (e *frameEncoder) counts(key string, c TokenCounts) {
	if len(c) == 0 {
		return
	}
	e.b = append(e.b, key...)
	e.b = append(e.b, '{')
	for i, t := range c {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = AppendJSONString(e.b, t.Name)
		e.b = append(e.b, ':')
		e.b = strconv.AppendInt(e.b, int64(t.N), 10)
	}
	e.b = append(e.b, '}')
}
