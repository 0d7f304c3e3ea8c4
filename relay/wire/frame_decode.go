package wire

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// # Frames decoded by hand
//
// An edge decodes every frame of every stream it serves, and encoding/json
// reads one by reflection, matching each key against the frame's fields
// without regard to case: under load, a tenth of the edge's processor
// time. decodeCommon reads the members the relay writes, under the names
// it writes them, and leaves anything else to encoding/json: another key
// (one differing only in case, written with escapes, or of a field this
// code does not know), a value of the wrong type, a number a field cannot
// hold, a null where a string or number belongs, a raw member nested
// deeper than jsonscan.MaxDepth, anything that is not JSON. The frame is the
// same either way, and so is the error-or-not: FuzzDecodeFrame compares
// the two.

// decodeCommon parses data by hand and reports true, or false when it
// leaves data to encoding/json. The frame's strings share one copy of
// data, so any of them keeps that copy (the frame's size) alive.
func decodeCommon(data []byte) (Frame, bool) {
	var f Frame
	p := newJSONScanner(data)
	if !p.document(func(key string) bool { return p.member(&f, key) }) {
		return Frame{}, false
	}
	return f, true
}

// member reads the value of f's member key.
func (p *jsonScanner) member(f *Frame, key string) bool {
	switch key {
	case "kind":
		return p.str((*string)(&f.Kind))
	case "seq":
		return p.uint(&f.Seq)
	case "role":
		return p.str(&f.Role)
	case "content":
		return p.str(&f.Content)
	case "data":
		return p.bytes(&f.Data)
	case "tool_calls":
		return p.raw(&f.ToolCalls)
	case "reasoning":
		return p.str(&f.Reasoning)
	case "reasoning_signature":
		return p.str(&f.ReasoningSignature)
	case "redacted_reasoning":
		return p.str(&f.RedactedReasoning)
	case "refusal":
		return p.str(&f.Refusal)
	case "logprobs":
		return p.raw(&f.Logprobs)
	case "logprobs_gap":
		return p.bool(&f.LogprobsGap)
	case "annotations":
		return p.raw(&f.Annotations)
	case "citations":
		return p.raw(&f.Citations)
	case "new_block":
		return p.bool(&f.NewBlock)
	case "system_fingerprint":
		return p.str(&f.SystemFingerprint)
	case "chunk_extra":
		return p.raw(&f.ChunkExtra)
	case "choice_extra":
		return p.raw(&f.ChoiceExtra)
	case "delta_extra":
		return p.raw(&f.DeltaExtra)
	case "provider":
		return p.str(&f.Provider)
	case "model":
		return p.str(&f.Model)
	case "attempt":
		return p.int(&f.Attempt)
	case "seam":
		return p.str((*string)(&f.Seam))
	case "tokens":
		return p.int(&f.Tokens)
	case "upstream_ttft_ms":
		return p.int64(&f.UpstreamTTFTMS)
	case "cached":
		return p.bool(&f.Cached)
	case "worker":
		return p.str(&f.Worker)
	case "tenant":
		return p.str(&f.Tenant)
	case "created":
		return p.int64(&f.Created)
	case "status":
		return p.str((*string)(&f.Status))
	case "finish_reason":
		return p.str(&f.FinishReason)
	case "stop_sequence":
		return p.str(&f.StopSequence)
	case "error":
		return p.errorObject(&f.Error)
	case "usage":
		return p.usageObject(&f.Usage)
	case "cost":
		return p.float(&f.Cost)
	case "attempts":
		return p.int(&f.Attempts)
	case "traceparent":
		return p.str(&f.TraceParent)
	case "durable":
		return p.raw(&f.Durable)
	}
	return false
}

// The readers below read one member's value into dst as encoding/json
// does, or report false; they read a null only where encoding/json sets
// something for it (a raw member, a pointer).

func (p *jsonScanner) str(dst *string) bool {
	s, ok := p.string()
	if ok {
		*dst = s
	}
	return ok
}

// bytes reads a standard base64 string, as encoding/json reads a []byte;
// anything else (a null, base64 encoding/json would also take) is left to
// encoding/json.
func (p *jsonScanner) bytes(dst *[]byte) bool {
	s, ok := p.string()
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return false
	}
	*dst = b
	return true
}

func (p *jsonScanner) bool(dst *bool) bool {
	switch {
	case p.literal("true"):
		*dst = true
	case p.literal("false"):
		*dst = false
	default:
		return false
	}
	return true
}

func (p *jsonScanner) uint(dst *uint64) bool {
	s, ok := p.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	*dst = n
	return err == nil
}

func (p *jsonScanner) int(dst *int) bool {
	s, ok := p.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	*dst = int(n)
	return err == nil
}

func (p *jsonScanner) int64(dst *int64) bool {
	s, ok := p.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	*dst = n
	return err == nil
}

func (p *jsonScanner) float(dst *float64) bool {
	s, ok := p.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseFloat(s, 64)
	*dst = n
	return err == nil
}

// raw reads any value as its bytes, as json.RawMessage does (null is
// "null").
func (p *jsonScanner) raw(dst *json.RawMessage) bool {
	start := p.i
	if !p.value() {
		return false
	}
	*dst = json.RawMessage(p.s[start:p.i])
	return true
}

// errorObject reads an Error into *dst, allocating it unless an earlier
// member did (encoding/json merges a repeated object into the first);
// null clears it.
func (p *jsonScanner) errorObject(dst **Error) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	if *dst == nil {
		*dst = new(Error)
	}
	e := *dst
	return p.object(func(key string, escaped bool) bool {
		switch {
		case escaped:
			return false
		case key == "message":
			return p.str(&e.Message)
		case key == "type":
			return p.str(&e.Type)
		case key == "code":
			return p.str(&e.Code)
		case key == "param":
			return p.str(&e.Param)
		case key == "http_status":
			return p.int(&e.Status)
		case key == "retry_after_ms":
			return p.int64(&e.RetryAfterMS)
		}
		return false
	})
}

// usageObject reads a Usage into *dst as errorObject reads an Error.
func (p *jsonScanner) usageObject(dst **Usage) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	if *dst == nil {
		*dst = new(Usage)
	}
	u := *dst
	return p.object(func(key string, escaped bool) bool {
		switch {
		case escaped:
			return false
		case key == "prompt_tokens":
			return p.int(&u.PromptTokens)
		case key == "completion_tokens":
			return p.int(&u.CompletionTokens)
		case key == "total_tokens":
			return p.int(&u.TotalTokens)
		case key == "prompt_tokens_details":
			return p.counts(&u.PromptTokensDetails)
		case key == "completion_tokens_details":
			return p.counts(&u.CompletionTokensDetails)
		case key == "server_tool_use":
			return p.counts(&u.ServerToolUse)
		}
		return false
	})
}

// counts reads TokenCounts as their UnmarshalJSON does: the members whose
// values are integers that fit an int64, in order; null or an object
// without such members is nil.
func (p *jsonScanner) counts(dst *TokenCounts) bool {
	*dst = nil
	if p.literal("null") {
		return true
	}
	return p.object(func(name string, escaped bool) bool {
		if escaped || !utf8.ValidString(name) {
			name = unquote(name)
		}
		start := p.i
		if !p.value() {
			return false
		}
		if n, err := strconv.ParseInt(p.s[start:p.i], 10, 64); err == nil {
			*dst = append(*dst, TokenCount{Name: name, N: int(n)})
		}
		return true
	})
}
