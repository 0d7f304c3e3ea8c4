package chat

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/relaydev/relay/relay/wire"
)

// Stream is a stream as its chat objects name it. Its methods render the
// stream's frames as the OpenAI objects clients expect, with a "relay"
// extension that SDKs ignore and relay-aware clients read.
type Stream struct {
	// ID is the stream's id.
	ID string
	// Meta is the stream's meta: the model asked for and when.
	Meta wire.Meta
	// ResumeToken, when set, is rendered in the relay object (the first
	// event of a POST's stream carries it).
	ResumeToken string
	// Cursors seals the cursors rendered in the relay object.
	Cursors *wire.CursorKey
}

// Chunk is OpenAI's chat.completion.chunk. Every field of the provider's
// chunks the relay does not rewrite is here: the known ones by name, the
// others (extra, at each level) as the provider sent them.
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *wire.Usage   `json:"usage,omitempty"`
	// Relay is a ChunkRelay, or an EndRelay in the last chunk of a done
	// stream.
	Relay any `json:"relay"`
	extra json.RawMessage
}

func (c Chunk) MarshalJSON() ([]byte, error) {
	type plain Chunk
	b, err := json.Marshal(plain(c))
	return withMembers(b, c.extra), err
}

// ChunkChoice is a Chunk's one choice.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        ChunkDelta      `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
	extra        json.RawMessage
}

func (c ChunkChoice) MarshalJSON() ([]byte, error) {
	type plain ChunkChoice
	b, err := json.Marshal(plain(c))
	return withMembers(b, c.extra), err
}

// ChunkDelta carries reasoning as reasoning_content, the name DeepSeek and
// vLLM use and clients read, whatever name the provider gave it.
type ChunkDelta struct {
	Role        string          `json:"role,omitempty"`
	Content     *string         `json:"content,omitempty"`
	Reasoning   string          `json:"reasoning_content,omitempty"`
	Refusal     string          `json:"refusal,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	extra       json.RawMessage
}

func (d ChunkDelta) MarshalJSON() ([]byte, error) {
	type plain ChunkDelta
	b, err := json.Marshal(plain(d))
	return withMembers(b, d.extra), err
}

// withMembers appends the members of the JSON object extra (a frame's
// unknown members of a level) to the JSON object obj.
func withMembers(obj []byte, extra json.RawMessage) []byte {
	inner := bytes.TrimSpace(extra)
	if len(obj) < 2 || len(inner) <= 2 || inner[0] != '{' {
		return obj
	}
	out := obj[: len(obj)-1 : len(obj)-1]
	if len(bytes.TrimSpace(out)) > 1 {
		out = append(out, ',')
	}
	return append(out, inner[1:]...)
}

// ChunkRelay says where a chunk is in the stream and who generated it.
type ChunkRelay struct {
	StreamID string `json:"stream_id"`
	Seq      uint64 `json:"seq"`
	Cursor   string `json:"cursor"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// RequestedModel is the model the client asked for, when another
	// one answered (a fallback).
	RequestedModel string    `json:"requested_model,omitempty"`
	Attempt        int       `json:"attempt"`
	Seam           wire.Seam `json:"seam,omitempty"`
	// Status is StatusCached in the chunks of an answer replayed from the
	// cache, and absent otherwise.
	Status wire.Status `json:"status,omitempty"`
	// LogprobsGap says that logprobs are missing before or in this chunk
	// (wire.Frame.LogprobsGap).
	LogprobsGap bool `json:"logprobs_gap,omitempty"`
	// ResumeToken is in the first event of a stream a POST started.
	ResumeToken string `json:"resume_token,omitempty"`
}

// EndRelay describes how a stream ended.
type EndRelay struct {
	StreamID string      `json:"stream_id"`
	Seq      uint64      `json:"seq"`
	Cursor   string      `json:"cursor"`
	Status   wire.Status `json:"status"`
	Attempts int         `json:"attempts"`
	Cost     float64     `json:"cost"`
	// RequestedModel is the model the client asked for, when another
	// one finished the answer.
	RequestedModel string `json:"requested_model,omitempty"`
	// ResumeToken is in the first event of a stream a POST started.
	ResumeToken string `json:"resume_token,omitempty"`
}

// Failure is the data of the event that ends a stream that is not done
// (and the body of a "stream": false answer to one): an OpenAI error, so
// SDKs raise instead of returning a cut answer. Usage, next to the error,
// is what the stream consumed before it ended: incomplete, failed and
// cancelled generations are billed too, so every terminal status carries
// it (when the worker counted any), as relay carries cost and attempts.
type Failure struct {
	Error Error       `json:"error"`
	Usage *wire.Usage `json:"usage,omitempty"`
	Relay EndRelay    `json:"relay"`
}

// StatusCached is relay.status of every chunk and of the end of an answer
// replayed from the cache (wire.Frame.Cached).
const StatusCached wire.Status = "cached"

// relayStatus is the status a client sees of frame f: StatusCached for a
// chunk or a done end of a kept answer, else the end's status.
func relayStatus(f *wire.Frame) wire.Status {
	if f.Cached && (f.Kind == wire.KindChunk || f.Status == wire.StatusDone) {
		return StatusCached
	}
	return f.Status
}

// answering is the model that generated chunk f, or finished the answer
// an end frame f ends: what a provider's own objects name as their model.
// It is the model asked for when f does not say (a failed stream).
func (s Stream) answering(f *wire.Frame) string { return cmp.Or(f.Model, s.Meta.Model) }

// requested is the model the client asked for if another one generated
// f, else "".
func (s Stream) requested(f *wire.Frame) string {
	if f.Model == "" || f.Model == s.Meta.Model {
		return ""
	}
	return s.Meta.Model
}

func (s Stream) completionID() string { return "chatcmpl-" + s.ID }

// object renders frame f, stored at cursor c, as SSE data: a Chunk, or a
// Failure for an end that is not done.
func (s Stream) object(c wire.Cursor, f *wire.Frame) any {
	switch {
	case f.Kind == wire.KindChunk:
		return s.Chunk(c, f)
	case f.Status == wire.StatusDone:
		return s.final(c, f)
	}
	return s.Failure(c, f)
}

// Failure renders an end frame that is not done, stored at cursor c.
func (s Stream) Failure(c wire.Cursor, f *wire.Frame) Failure {
	return Failure{Error: ErrorOf(EndError(*f)), Usage: f.Usage, Relay: s.endRelay(c, f)}
}

// Chunk renders a chunk frame, stored at cursor c.
func (s Stream) Chunk(c wire.Cursor, f *wire.Frame) Chunk {
	content := f.Content
	delta := ChunkDelta{Role: f.Role, Content: &content, Reasoning: f.Reasoning, Refusal: f.Refusal,
		ToolCalls: f.ToolCalls, Annotations: f.Annotations, extra: f.DeltaExtra}
	return Chunk{
		ID:                s.completionID(),
		Object:            "chat.completion.chunk",
		Created:           s.Meta.Created,
		Model:             s.answering(f),
		SystemFingerprint: f.SystemFingerprint,
		Choices:           []ChunkChoice{{Delta: delta, Logprobs: f.Logprobs, extra: f.ChoiceExtra}},
		extra:             f.ChunkExtra,
		Relay: ChunkRelay{
			StreamID:       s.ID,
			Seq:            f.Seq,
			Cursor:         s.Cursors.String(c),
			Provider:       f.Provider,
			Model:          f.Model,
			RequestedModel: s.requested(f),
			Attempt:        f.Attempt,
			Seam:           f.Seam,
			Status:         relayStatus(f),
			LogprobsGap:    f.LogprobsGap,

			ResumeToken: s.ResumeToken,
		},
	}
}

// final is the last chunk of a done stream: an empty delta with the finish
// reason and the usage.
func (s Stream) final(c wire.Cursor, f *wire.Frame) Chunk {
	reason := FinishReason(*f)
	return Chunk{
		ID:      s.completionID(),
		Object:  "chat.completion.chunk",
		Created: s.Meta.Created,
		Model:   s.answering(f),
		Choices: []ChunkChoice{{FinishReason: &reason}},
		Usage:   f.Usage,
		Relay:   s.endRelay(c, f),
	}
}

func (s Stream) endRelay(c wire.Cursor, f *wire.Frame) EndRelay {
	return EndRelay{
		StreamID: s.ID,
		Seq:      f.Seq,
		Cursor:   s.Cursors.String(c),
		Status:   relayStatus(f),
		Attempts: f.Attempts,
		Cost:     f.Cost,

		RequestedModel: s.requested(f),

		ResumeToken: s.ResumeToken,
	}
}

// marshal renders an object built here; none can fail to encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("chat: encode: " + err.Error())
	}
	return b
}
