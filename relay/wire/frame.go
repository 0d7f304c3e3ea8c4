package wire

import (
	"encoding/json"
	"fmt"
)

// Kind says what a frame on a stream's chunk subject is.
type Kind string

const (
	// KindClaim marks that a worker took ownership of the stream. Clients
	// never see it; it exists so that the previous owner is fenced off.
	KindClaim Kind = "claim"
	// KindChunk carries generated text (or a tool-call delta).
	KindChunk Kind = "chunk"
	// KindEnd is the terminal frame. Nothing follows it.
	KindEnd Kind = "end"
)

// Status is the terminal status of a stream.
type Status string

const (
	// StatusDone: the provider finished the answer (FinishReason says how).
	StatusDone Status = "done"
	// StatusIncomplete: some text was delivered, then the relay gave up.
	// The client knows the answer is cut.
	StatusIncomplete Status = "incomplete"
	// StatusFailed: nothing usable was generated.
	StatusFailed Status = "failed"
	// StatusCancelled: a client cancelled the generation.
	StatusCancelled Status = "cancelled"
)

// Seam names why a chunk starts a new upstream attempt. Clients see it in
// the chunk's relay extension, so they can tell which provider and model
// produced which part of an answer.
type Seam string

const (
	SeamRetry        Seam = "retry"
	SeamContinuation Seam = "continuation"
	SeamFallback     Seam = "fallback"
	SeamTakeover     Seam = "takeover"
)

// Frame is one message on a stream's chunk subject.
type Frame struct {
	Kind Kind `json:"kind"`

	// Seq is the per-stream sequence of chunks and of the end frame (one
	// past the last chunk); claims have none.
	Seq uint64 `json:"seq,omitempty"`
	// Role is set on the first chunk ("assistant").
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
	// Data is a chunk's content when it is bytes that are not UTF-8 text
	// (a Durable Stream of a binary type, relay/durable), which Content
	// cannot hold.
	Data      []byte          `json:"data,omitempty"`
	ToolCalls json.RawMessage `json:"tool_calls,omitempty"`
	// Reasoning is the model's reasoning text in this chunk (see
	// chat.Delta.Reasoning); clients see it where their dialect has a
	// place for it (reasoning_content, a thinking block, a reasoning item).
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningSignature is Anthropic's signature of the thinking block
	// the reasoning so far belongs to (chat.Delta.ReasoningSignature):
	// it closes that block; reasoning after it is a new block. Only
	// Messages clients have a place for it.
	ReasoningSignature string `json:"reasoning_signature,omitempty"`
	// RedactedReasoning is the data of an Anthropic redacted_thinking
	// block, alone in its chunk; only Messages clients have a place for
	// it.
	RedactedReasoning string `json:"redacted_reasoning,omitempty"`
	// Refusal is the model's refusal text in this chunk (delta.refusal).
	Refusal string `json:"refusal,omitempty"`
	// Logprobs is choice.logprobs for the chunk's tokens: the provider's
	// object when the chunk holds one delta, else one with the content
	// and refusal arrays of its deltas concatenated in order. Each entry
	// is stored as the provider sent it. Logprobs belong to the attempt
	// that produced them; see LogprobsGap for where some are missing.
	Logprobs json.RawMessage `json:"logprobs,omitempty"`
	// LogprobsGap says that logprobs of text in this chunk or between the
	// previous chunk and this one were dropped: at a prompt-mode
	// continuation, the deltas the overlap filter held back while it
	// decided whether they repeated the answer have text that was cut or
	// moved, so their logprobs no longer match it.
	LogprobsGap bool `json:"logprobs_gap,omitempty"`
	// Annotations are the delta.annotations elements (url citations) of
	// the chunk's deltas, in order, as the provider sent them.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Citations are Anthropic citation objects (citations_delta) for the
	// chunk's text, which follows them, as the provider sent them.
	Citations json.RawMessage `json:"citations,omitempty"`
	// NewBlock says that the chunk's text starts a new text block of the
	// provider's answer (chat.Delta.NewBlock), which Messages clients
	// see as a content block of its own.
	NewBlock bool `json:"new_block,omitempty"`
	// SystemFingerprint is the provider's system_fingerprint for the
	// attempt that produced the chunk.
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
	// ChunkExtra, ChoiceExtra and DeltaExtra are the members of the
	// provider's chunk, of its choice and of its delta that the relay
	// does not know (a field added after this code was written), each a
	// JSON object of the raw members in the order they came. A chunk
	// never merges two different values of one such member: the
	// publisher starts a new chunk instead.
	ChunkExtra  json.RawMessage `json:"chunk_extra,omitempty"`
	ChoiceExtra json.RawMessage `json:"choice_extra,omitempty"`
	DeltaExtra  json.RawMessage `json:"delta_extra,omitempty"`

	// Provider and Model say who generated a chunk, and on a done end
	// frame who finished the answer; Attempt counts upstream calls within
	// the stream (1 for the first); Seam is set on the first chunk of an
	// attempt after the first.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Seam     Seam   `json:"seam,omitempty"`
	// Tokens counts the upstream deltas with text that make up a chunk's
	// content: the tokens it holds, as far as the provider's stream tells
	// (most providers send one token per delta; none sends less). A
	// continuation asks for the client's max_tokens less the stream's sum.
	Tokens int `json:"tokens,omitempty"`
	// UpstreamTTFTMS is set on a stream's first chunk: the time to first
	// token of the upstream call that produced it, in milliseconds, so
	// that an edge can tell the part of its own time to first token that
	// the relay added (relay_edge_relay_added_ttft_seconds).
	UpstreamTTFTMS int64 `json:"upstream_ttft_ms,omitempty"`
	// Cached marks the chunks and the end frame of an answer replayed from
	// AnswerBucket rather than generated for this stream, so that no
	// client takes a kept answer for a fresh one.
	Cached bool `json:"cached,omitempty"`

	// Worker identifies the claiming worker (claim frames).
	Worker string `json:"worker,omitempty"`
	// Tenant and Created are the stream's Meta on a claim frame, with
	// Model (the model the client asked for, on a claim): a stream an
	// offer's taker claimed has no Meta record, and its first claim tells
	// an edge whose it is (wire "Offers").
	Tenant  string `json:"tenant,omitempty"`
	Created int64  `json:"created,omitempty"`

	// End frames only.
	Status       Status `json:"status,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
	// StopSequence is the stop sequence that ended a done answer, when
	// the provider said which (upstream.Stream.StopSequence).
	StopSequence string  `json:"stop_sequence,omitempty"`
	Error        *Error  `json:"error,omitempty"`
	Usage        *Usage  `json:"usage,omitempty"`
	Cost         float64 `json:"cost,omitempty"`
	Attempts     int     `json:"attempts,omitempty"`
	// TraceParent is the W3C traceparent of the worker span that ended the
	// stream, when the request was traced: an edge serving a resume links
	// its own span to the request's trace with it (relay/README.md "Tracing").
	TraceParent string `json:"traceparent,omitempty"`

	// Durable is the state of a Durable Stream written with the frame
	// (relay/durable): what the next append must be checked against, read
	// back from the stream's last frame, so that it is stored atomically
	// with the append it results from.
	Durable json.RawMessage `json:"durable,omitempty"`
}

// Encode renders the frame for publishing, as json.Marshal renders it
// (appendFrame, by hand).
func (f Frame) Encode() []byte {
	if b, ok := appendFrame(make([]byte, 0, encodedSize(&f)), &f); ok {
		return b
	}
	return encodeJSON(f)
}

// encodeJSON renders f with encoding/json, for the frames appendFrame
// refuses: it panics for those, as they are the relay's own bug.
func encodeJSON(f Frame) []byte {
	b, err := json.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("wire: encode frame: %v", err))
	}
	return b
}

// DecodeFrame parses a stored frame: by hand (decodeCommon) when it has
// the shape the relay writes, else with encoding/json; the frame and the
// error-or-not are the same either way.
func DecodeFrame(data []byte) (Frame, error) {
	f, ok := decodeCommon(data)
	if !ok {
		var err error
		if f, err = decodeJSON(data); err != nil {
			return Frame{}, err
		}
	}
	return checkKind(f)
}

// decodeJSON parses a frame with encoding/json.
func decodeJSON(data []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("wire: decode frame: %w", err)
	}
	return f, nil
}

// checkKind returns f, or an error if its kind is none the relay knows.
func checkKind(f Frame) (Frame, error) {
	switch f.Kind {
	case KindClaim, KindChunk, KindEnd:
		return f, nil
	}
	return Frame{}, fmt.Errorf("wire: decode frame: unknown kind %q", f.Kind)
}
