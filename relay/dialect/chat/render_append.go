package chat

import (
	"strconv"

	"github.com/relaydev/relay/relay/wire"
)

// # Chat chunks rendered by hand
//
// Every token a client gets is a chat.completion.chunk, and encoding/json
// renders one by reflection three levels deep, each level's MarshalJSON
// (render.go: they merge a provider's unknown members) encoding and then
// validating the level below: under load, most of the edge's processor
// time. The chunks nearly all of them are (text, a role, reasoning or a
// refusal, and the done stream's last chunk with its usage) are appended
// here instead, straight into the event being written; anything else
// (tool calls, logprobs, annotations, a provider's unknown members, a
// failed end) is left to encoding/json. The bytes are the same either way:
// FuzzRenderChunk compares the two, and TestRenderAppendKnowsEveryField
// fails when a field is added to a rendered type, until it is added here.

// AppendObject appends frame f, stored at cursor c, as the JSON of a Chunk
// (or of a Failure for an end that is not done): by hand when it has a
// common shape (appendCommon), else with encoding/json.
func (s Stream) AppendObject(b []byte, c wire.Cursor, f *wire.Frame) []byte {
	if out, ok := s.appendCommon(b, c, f); ok {
		return out
	}
	return append(b, marshal(s.object(c, f))...)
}

// appendCommon appends s.object(c, f) as JSON and reports true if f is a
// chunk with none of the raw members (tool calls, logprobs, annotations,
// unknown members) or a done end frame; otherwise it returns b as it was,
// and false.
func (s Stream) appendCommon(b []byte, c wire.Cursor, f *wire.Frame) ([]byte, bool) {
	switch {
	case f.Kind == wire.KindChunk:
		if len(f.ToolCalls) > 0 || len(f.Logprobs) > 0 || len(f.Annotations) > 0 ||
			len(f.ChunkExtra) > 0 || len(f.ChoiceExtra) > 0 || len(f.DeltaExtra) > 0 {
			return b, false
		}
		return s.appendChunk(b, c, f), true
	case f.Status == wire.StatusDone:
		return s.appendFinal(b, c, f)
	}
	return b, false
}

// appendHead appends the members every chunk begins with, after its '{':
// model is the model the chunk names.
func (s Stream) appendHead(b []byte, model string) []byte {
	b = append(b, `{"id":"chatcmpl-`...)
	b = wire.AppendJSONChars(b, s.ID)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, s.Meta.Created, 10)
	b = append(b, `,"model":`...)
	return wire.AppendJSONString(b, model)
}

// appendChunk appends what Stream.Chunk renders for a chunk frame without
// raw members.
func (s Stream) appendChunk(b []byte, c wire.Cursor, f *wire.Frame) []byte {
	b = s.appendHead(b, s.answering(f))
	if f.SystemFingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = wire.AppendJSONString(b, f.SystemFingerprint)
	}
	b = append(b, `,"choices":[{"index":0,"delta":{`...)
	if f.Role != "" {
		b = append(b, `"role":`...)
		b = wire.AppendJSONString(b, f.Role)
		b = append(b, ',')
	}
	b = append(b, `"content":`...)
	b = wire.AppendJSONString(b, f.Content)
	b = appendOptString(b, "reasoning_content", f.Reasoning)
	b = appendOptString(b, "refusal", f.Refusal)
	b = append(b, `},"finish_reason":null}],"relay":{"stream_id":`...)
	b = wire.AppendJSONString(b, s.ID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, f.Seq, 10)
	b = append(b, `,"cursor":"`...)
	b = s.Cursors.Append(b, c)
	b = append(b, `","provider":`...)
	b = wire.AppendJSONString(b, f.Provider)
	b = append(b, `,"model":`...)
	b = wire.AppendJSONString(b, f.Model)
	b = appendOptString(b, "requested_model", s.requested(f))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(f.Attempt), 10)
	b = appendOptString(b, "seam", string(f.Seam))
	b = appendOptString(b, "status", string(relayStatus(f)))
	if f.LogprobsGap {
		b = append(b, `,"logprobs_gap":true`...)
	}
	b = appendOptString(b, "resume_token", s.ResumeToken)
	return append(b, "}}"...)
}

// appendFinal appends what Stream.final renders for a done end frame; it
// reports false, with b as it was, for a cost JSON cannot hold.
func (s Stream) appendFinal(b []byte, c wire.Cursor, f *wire.Frame) ([]byte, bool) {
	start := len(b)
	b = s.appendHead(b, s.answering(f))
	b = append(b, `,"choices":[{"index":0,"delta":{},"finish_reason":`...)
	b = wire.AppendJSONString(b, FinishReason(*f))
	b = append(b, "}]"...)
	if f.Usage != nil {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, f.Usage)
	}
	b = append(b, `,"relay":{"stream_id":`...)
	b = wire.AppendJSONString(b, s.ID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, f.Seq, 10)
	b = append(b, `,"cursor":"`...)
	b = s.Cursors.Append(b, c)
	b = append(b, `","status":`...)
	b = wire.AppendJSONString(b, string(relayStatus(f)))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(f.Attempts), 10)
	b = append(b, `,"cost":`...)
	b, ok := wire.AppendJSONFloat(b, f.Cost)
	if !ok {
		return b[:start], false
	}
	b = appendOptString(b, "requested_model", s.requested(f))
	b = appendOptString(b, "resume_token", s.ResumeToken)
	return append(b, "}}"...), true
}

// appendUsage appends u as encoding/json renders a wire.Usage.
func appendUsage(b []byte, u *wire.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = appendCounts(b, "prompt_tokens_details", u.PromptTokensDetails)
	b = appendCounts(b, "completion_tokens_details", u.CompletionTokensDetails)
	b = appendCounts(b, "server_tool_use", u.ServerToolUse)
	return append(b, '}')
}

// appendCounts appends the member name with the counts c as an object, as
// wire.TokenCounts renders them, unless c is empty (omitempty).
func appendCounts(b []byte, name string, c wire.TokenCounts) []byte {
	if len(c) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":{`...)
	for i, t := range c {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendJSONString(b, t.Name)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(t.N), 10)
	}
	return append(b, '}')
}

// appendOptString appends the member name with the string s, unless s is
// empty (omitempty). name needs no escaping.
func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return wire.AppendJSONString(b, s)
}
