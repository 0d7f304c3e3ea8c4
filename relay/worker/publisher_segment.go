package worker

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// maxChunkAttached bounds the bytes a chunk carries besides its text (tool
// calls, logprobs, annotations, unknown members) when it merges several
// deltas: with top_logprobs, a token's entry is a few kilobytes, and the
// deltas that pile up behind a slow publish must not make a frame larger
// than NATS takes (1 MiB by default).
const maxChunkAttached = 256 << 10

// segment is what consecutive deltas of an attempt say, merged into one
// chunk frame's worth: text concatenated, tool calls, annotations and
// logprobs entries appended in order. A delta that cannot be merged
// without changing what the provider said starts a new segment (accepts).
type segment struct {
	content, reasoning, refusal []byte
	signature                   string            // closes the reasoning before it
	redacted                    string            // a redacted thinking block, alone in its segment
	citations                   []json.RawMessage // citation objects, before the text they come with
	newBlock                    bool              // the text starts a new block
	tokens                      int               // deltas with text in content
	tools                       []json.RawMessage // tool-call fragments
	annotations                 []json.RawMessage // annotation elements
	logprobs                    []json.RawMessage // each delta's logprobs object
	logprobsGap                 bool
	fingerprint                 string
	attached                    int // bytes of what rides with the text (maxChunkAttached)
	chunkExtra                  []chat.Field
	choiceExtra                 []chat.Field
	deltaExtra                  []chat.Field
}

// hasData reports whether the segment says something a client reads as
// part of the answer; the rest (unknown members, the fingerprint) rides
// with such a segment.
func (s *segment) hasData() bool {
	return len(s.content) > 0 || len(s.reasoning) > 0 || len(s.refusal) > 0 ||
		len(s.tools) > 0 || len(s.annotations) > 0 || len(s.logprobs) > 0 ||
		s.signature != "" || s.redacted != "" || len(s.citations) > 0
}

// levelFields are the unknown members of one level of a chunk; level is a
// prefix that cannot start a member's name.
type levelFields struct {
	level  string
	fields []chat.Field
}

// extras are the segment's unknown members by level.
func (s *segment) extras() [3]levelFields {
	return [3]levelFields{{"chunk\x00", s.chunkExtra}, {"choice\x00", s.choiceExtra}, {"delta\x00", s.deltaExtra}}
}

// accepts reports whether d can be merged into s without reordering what
// the provider said, merging two values the relay does not understand or
// growing the chunk beyond maxChunkAttached: text after a tool call, and
// reasoning after answer text, stay after it; a different fingerprint, or
// a different value of an unknown member, starts a new chunk. So do
// Anthropic's block boundaries, which a chunk renders in one order
// (reasoning, its signature, citations, text): a signature after
// anything but reasoning, reasoning after a signature (the next thinking
// block), citations after text, a new text block, and a redacted thinking
// block, which has a chunk of its own.
func (s *segment) accepts(d *chat.Delta) bool {
	text := d.Content != "" || d.Reasoning != "" || d.Refusal != ""
	switch {
	case s.attached > 0 && s.attached+attachedSize(d) > maxChunkAttached,
		len(s.tools) > 0 && text,
		len(s.content) > 0 && d.Reasoning != "",
		s.redacted != "",
		(d.RedactedReasoning != "" || d.NewBlock) && s.hasData(),
		d.ReasoningSignature != "" && (s.signature != "" || len(s.content) > 0 || len(s.refusal) > 0 || len(s.tools) > 0 || len(s.citations) > 0),
		s.signature != "" && d.Reasoning != "",
		len(d.Citations) > 0 && (len(s.content) > 0 || len(s.tools) > 0),
		d.SystemFingerprint != "" && s.fingerprint != "" && d.SystemFingerprint != s.fingerprint:
		return false
	}
	return !conflicts(s.chunkExtra, d.ChunkExtra) && !conflicts(s.choiceExtra, d.ChoiceExtra) && !conflicts(s.deltaExtra, d.DeltaExtra)
}

// attachedSize is what d adds to a chunk besides its text.
func attachedSize(d *chat.Delta) int {
	n := len(d.ToolCalls) + len(d.Annotations) + len(d.Logprobs) + len(d.Citations) + len(d.ReasoningSignature) + len(d.RedactedReasoning)
	for _, fs := range [...][]chat.Field{d.ChunkExtra, d.ChoiceExtra, d.DeltaExtra} {
		for _, f := range fs {
			n += len(f.Name) + len(f.Value)
		}
	}
	return n
}

// add merges d, whose tool calls, annotations and citations are already
// split into their elements.
func (s *segment) add(d *chat.Delta, tools, annotations, citations []json.RawMessage) {
	s.attached += attachedSize(d)
	s.content = append(s.content, d.Content...)
	if d.Content != "" {
		s.tokens++
	}
	s.reasoning = append(s.reasoning, d.Reasoning...)
	s.refusal = append(s.refusal, d.Refusal...)
	s.signature = cmp.Or(d.ReasoningSignature, s.signature)
	s.redacted = cmp.Or(d.RedactedReasoning, s.redacted)
	s.citations = append(s.citations, citations...)
	s.newBlock = s.newBlock || d.NewBlock
	s.tools = append(s.tools, tools...)
	s.annotations = append(s.annotations, annotations...)
	if len(d.Logprobs) > 0 {
		s.logprobs = append(s.logprobs, d.Logprobs)
	}
	s.fingerprint = cmp.Or(d.SystemFingerprint, s.fingerprint)
	s.chunkExtra = mergeFields(s.chunkExtra, d.ChunkExtra)
	s.choiceExtra = mergeFields(s.choiceExtra, d.ChoiceExtra)
	s.deltaExtra = mergeFields(s.deltaExtra, d.DeltaExtra)
}

// rest fills f with everything but the text, which rides with the last
// piece of a segment cut at maxChunkContent.
func (s *segment) rest(f *wire.Frame) {
	f.Refusal = string(s.refusal)
	f.ReasoningSignature, f.RedactedReasoning = s.signature, s.redacted
	if len(s.citations) > 0 {
		f.Citations = mustJSON(s.citations)
	}
	if len(s.tools) > 0 {
		f.ToolCalls = mustJSON(s.tools)
	}
	if len(s.annotations) > 0 {
		f.Annotations = mustJSON(s.annotations)
	}
	f.Logprobs = wire.MergeLogprobs(s.logprobs)
	f.LogprobsGap = s.logprobsGap
	f.ChunkExtra = fieldsObject(s.chunkExtra)
	f.ChoiceExtra = fieldsObject(s.choiceExtra)
	f.DeltaExtra = fieldsObject(s.deltaExtra)
}

// conflicts reports whether a member of add has another value in have.
func conflicts(have, add []chat.Field) bool {
	for _, a := range add {
		for _, h := range have {
			if h.Name == a.Name && !bytes.Equal(h.Value, a.Value) {
				return true
			}
		}
	}
	return false
}

// mergeFields appends the members of add that have lacks (accepts ruled
// out different values of one member).
func mergeFields(have, add []chat.Field) []chat.Field {
	for _, a := range add {
		if !slices.ContainsFunc(have, func(h chat.Field) bool { return h.Name == a.Name }) {
			have = append(have, a)
		}
	}
	return have
}

// fieldsObject renders members as a JSON object in their order; nil for
// none.
func fieldsObject(fs []chat.Field) json.RawMessage {
	if len(fs) == 0 {
		return nil
	}
	b := []byte{'{'}
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, mustJSON(f.Name)...)
		b = append(b, ':')
		b = append(b, f.Value...)
	}
	return append(b, '}')
}

// splitArray returns the elements of a raw JSON array.
func splitArray(what string, raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("worker: %w: %s is not an array: %v", upstream.ErrMalformed, what, err)
	}
	return elems, nil
}
