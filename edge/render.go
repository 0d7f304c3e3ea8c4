package edge

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// view renders one stream's frames as the OpenAI objects clients expect,
// with a "relay" extension that SDKs ignore and relay-aware clients read.
type view struct {
	id   string
	meta wire.Meta
	// resumeToken, when set, is rendered in the relay object (the first
	// event of a POST's stream carries it).
	resumeToken string
}

// chatEvents renders frames as chat completion chunks, each with its
// cursor as the event id, and ends with [DONE] (the eventDialect of chat
// completions and GET /v1/streams/{id}).
type chatEvents struct{ v view }

func (c *chatEvents) begin(*sseWriter) {}

func (c *chatEvents) frame(out *sseWriter, e chunklog.Entry) {
	out.cursorEvent(cursorOf(e), func(b []byte) []byte { return c.v.appendObject(b, e) })
	// The first event carries the view's resume token, if any.
	c.v.resumeToken = ""
}

func (c *chatEvents) end(out *sseWriter) { out.done() }

// cut ends the response with an error event without an id.
func (c *chatEvents) cut(out *sseWriter, e *wire.Error) {
	out.event("", marshal(struct {
		Error chat.Error `json:"error"`
	}{chat.ErrorOf(e)}))
}

// chunkObject is OpenAI's chat.completion.chunk. Every field of the
// provider's chunks the relay does not rewrite is here: the known ones by
// name, the others (extra, at each level) as the provider sent them.
type chunkObject struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *wire.Usage   `json:"usage,omitempty"`
	Relay             any           `json:"relay"`
	extra             json.RawMessage
}

func (c chunkObject) MarshalJSON() ([]byte, error) {
	type plain chunkObject
	b, err := json.Marshal(plain(c))
	return withMembers(b, c.extra), err
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        chunkDelta      `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
	extra        json.RawMessage
}

func (c chunkChoice) MarshalJSON() ([]byte, error) {
	type plain chunkChoice
	b, err := json.Marshal(plain(c))
	return withMembers(b, c.extra), err
}

// chunkDelta carries reasoning as reasoning_content, the name DeepSeek and
// vLLM use and clients read, whatever name the provider gave it.
type chunkDelta struct {
	Role        string          `json:"role,omitempty"`
	Content     *string         `json:"content,omitempty"`
	Reasoning   string          `json:"reasoning_content,omitempty"`
	Refusal     string          `json:"refusal,omitempty"`
	ToolCalls   json.RawMessage `json:"tool_calls,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	extra       json.RawMessage
}

func (d chunkDelta) MarshalJSON() ([]byte, error) {
	type plain chunkDelta
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

// chunkRelay says where a chunk is in the stream and who generated it.
type chunkRelay struct {
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
	// Status is "cached" in the chunks of an answer replayed from the
	// cache (cached.go), and absent otherwise.
	Status wire.Status `json:"status,omitempty"`
	// LogprobsGap says that logprobs are missing before or in this chunk
	// (wire.Frame.LogprobsGap).
	LogprobsGap bool `json:"logprobs_gap,omitempty"`
	// ResumeToken is in the first event of a stream a POST started.
	ResumeToken string `json:"resume_token,omitempty"`
}

// answering is the model that generated chunk f, or finished the answer
// an end frame f ends: what a provider's own objects name as their model.
// It is the model asked for when f does not say (a failed stream).
func (v view) answering(f wire.Frame) string { return cmp.Or(f.Model, v.meta.Model) }

// requested is the model the client asked for if another one generated
// f, else "".
func (v view) requested(f wire.Frame) string {
	if f.Model == "" || f.Model == v.meta.Model {
		return ""
	}
	return v.meta.Model
}

// endRelay describes how a stream ended.
type endRelay struct {
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

// failureObject is the data of the event that ends a stream that is not
// done (and the body of a "stream": false answer to one): an OpenAI error,
// so SDKs raise instead of returning a cut answer. Usage, next to the
// error, is what the stream consumed before it ended: incomplete,
// failed and cancelled generations are billed too, so every terminal
// status carries it (when the worker counted any), as relay carries cost
// and attempts.
type failureObject struct {
	Error chat.Error  `json:"error"`
	Usage *wire.Usage `json:"usage,omitempty"`
	Relay endRelay    `json:"relay"`
}

func cursorOf(e chunklog.Entry) wire.Cursor {
	return wire.Cursor{Seq: e.Frame.Seq, JSSeq: e.JSSeq}
}

func (v view) completionID() string { return "chatcmpl-" + v.id }

// object renders a chunk or an end frame as SSE data: a chunkObject, or a
// failureObject for an end that is not done.
func (v view) object(e chunklog.Entry) any {
	f := e.Frame
	switch {
	case f.Kind == wire.KindChunk:
		return v.chunk(e)
	case f.Status == wire.StatusDone:
		return v.final(e)
	}
	return v.failure(e)
}

// failure renders an end frame that is not done.
func (v view) failure(e chunklog.Entry) failureObject {
	return failureObject{Error: chat.ErrorOf(endError(e.Frame)), Usage: e.Frame.Usage, Relay: v.endRelay(e)}
}

// chunk renders a chunk frame.
func (v view) chunk(e chunklog.Entry) chunkObject {
	f := e.Frame
	content := f.Content
	delta := chunkDelta{Role: f.Role, Content: &content, Reasoning: f.Reasoning, Refusal: f.Refusal,
		ToolCalls: f.ToolCalls, Annotations: f.Annotations, extra: f.DeltaExtra}
	return chunkObject{
		ID:                v.completionID(),
		Object:            "chat.completion.chunk",
		Created:           v.meta.Created,
		Model:             v.answering(f),
		SystemFingerprint: f.SystemFingerprint,
		Choices:           []chunkChoice{{Delta: delta, Logprobs: f.Logprobs, extra: f.ChoiceExtra}},
		extra:             f.ChunkExtra,
		Relay: chunkRelay{
			StreamID:       v.id,
			Seq:            f.Seq,
			Cursor:         cursorOf(e).String(),
			Provider:       f.Provider,
			Model:          f.Model,
			RequestedModel: v.requested(f),
			Attempt:        f.Attempt,
			Seam:           f.Seam,
			Status:         relayStatus(f),
			LogprobsGap:    f.LogprobsGap,

			ResumeToken: v.resumeToken,
		},
	}
}

// final is the last chunk of a done stream: an empty delta with the finish
// reason and the usage.
func (v view) final(e chunklog.Entry) chunkObject {
	reason := finishReason(e.Frame)
	return chunkObject{
		ID:      v.completionID(),
		Object:  "chat.completion.chunk",
		Created: v.meta.Created,
		Model:   v.answering(e.Frame),
		Choices: []chunkChoice{{FinishReason: &reason}},
		Usage:   e.Frame.Usage,
		Relay:   v.endRelay(e),
	}
}

func (v view) endRelay(e chunklog.Entry) endRelay {
	return endRelay{
		StreamID: v.id,
		Seq:      e.Frame.Seq,
		Cursor:   cursorOf(e).String(),
		Status:   relayStatus(e.Frame),
		Attempts: e.Frame.Attempts,
		Cost:     e.Frame.Cost,

		RequestedModel: v.requested(e.Frame),

		ResumeToken: v.resumeToken,
	}
}

// marshal renders an object the edge built; none can fail to encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("edge: encode: " + err.Error())
	}
	return b
}

// finishReason of a done end frame; "stop" if the worker left it empty, so
// a finished answer never looks unfinished.
func finishReason(f wire.Frame) string {
	if f.FinishReason == "" {
		return "stop"
	}
	return f.FinishReason
}

// endError is the error of an end frame that is not done, with a status:
// the frame's own, or one made up from the terminal status.
func endError(f wire.Frame) *wire.Error {
	var e wire.Error
	if f.Error != nil {
		e = *f.Error
	}
	if e.Type == "" {
		switch f.Status {
		case wire.StatusIncomplete:
			e.Type = wire.TypeIncomplete
		case wire.StatusCancelled:
			e.Type = wire.TypeCancelled
		default:
			e.Type = wire.TypeUpstream
		}
	}
	if e.Message == "" {
		e.Message = "the stream ended " + string(f.Status) + " before the answer was complete"
	}
	if e.Code == "" {
		e.Code = string(f.Status)
	}
	e.Status = statusOf(&e, http.StatusBadGateway)
	return &e
}
