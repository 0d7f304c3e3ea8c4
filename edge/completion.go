package edge

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// serveCompletion answers a request with "stream": false. It follows the
// same durable stream as a streaming client and answers once it ended: one
// chat.completion if the stream is done; the end frame's error with its
// status if it failed; and, if it ended incomplete or cancelled, a 200
// chat.completion with the text generated so far, finish_reason null,
// relay.status saying which, and the error that cut it. A cut answer never
// looks finished, and it is no 5xx: SDKs retry those on their own, and a
// retry would pay for the whole answer again. It reports whether the
// client left before the end.
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, o origin) (left bool) {
	var acc completion
	end, left, ok := s.followToEnd(w, r, o, acc.add)
	switch {
	case !ok:
		return left
	case end.Frame.Status == wire.StatusFailed:
		setRetryAfter(w, endError(end.Frame)) // admission.go
		writeJSON(w, endError(end.Frame).Status, o.view.failure(end))
	default:
		markCached(w, []chunklog.Entry{end}) // cached.go
		writeJSON(w, http.StatusOK, acc.object(o.view, end))
	}
	return false
}

// followToEnd follows o for a client that wants the whole answer: it
// passes every chunk to add and returns the end frame. If it cannot reach
// the end, it answers the client (unless the client left: left) and
// reports !ok; an error of add is answered as an interruption.
func (s *Server) followToEnd(w http.ResponseWriter, r *http.Request, o origin, add func(wire.Frame) error) (end chunklog.Entry, left, ok bool) {
	sess := s.sseSession(r, o, metrics.TransportCompletion)
	defer sess.close()
	ctx, done := s.clients.add(r.Context(), clientUnary)
	defer done()
	f, err := s.follow(o)
	if err != nil {
		writeError(w, unavailable("following the stream", err))
		return end, false, false
	}
	defer f.close()
	for !f.ended() {
		entries, err := f.next(ctx, s.cfg.Keepalive)
		sess.delivered(entries)
		for _, e := range entries {
			if e.Frame.Kind == wire.KindEnd {
				end = e
			} else if aerr := add(e.Frame); aerr != nil && err == nil {
				err = aerr
			}
		}
		if err != nil {
			if r.Context().Err() != nil {
				return end, true, false
			}
			if errors.Is(err, errShuttingDown) {
				writeDraining(w, s.cfg.RetryHint, "the edge is shutting down; the answer is still being generated as stream "+
					o.view.id+": read it with GET /v1/streams/"+o.view.id+" from another edge")
				return end, false, false
			}
			s.log.Warn("completion interrupted", "stream_id", o.view.id, "err", err)
			e := interruptedError()
			e.Status = http.StatusBadGateway
			writeError(w, e)
			return end, false, false
		}
	}
	return end, false, true
}

// completion accumulates a stream's chunks into one message: text,
// reasoning and refusal concatenated, annotations and logprobs entries in
// order, the fingerprint of the last attempt. The chunks' unknown members
// are not kept: they are parts of deltas, with no defined meaning for a
// whole message.
type completion struct {
	content, reasoning, refusal strings.Builder
	// toolCalls by their index in the deltas.
	toolCalls   map[int]*chat.ToolCall
	annotations []json.RawMessage
	logprobs    []json.RawMessage
	logprobsGap bool
	fingerprint string
	// provider and model generated the last chunk.
	provider, model string
}

// completionObject is OpenAI's chat.completion.
type completionObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	// SystemFingerprint is the one of the attempt that ended the answer.
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []completionChoice `json:"choices"`
	Usage             *wire.Usage        `json:"usage,omitempty"`
	// Error says what cut an answer that ended incomplete or cancelled.
	Error *chat.Error     `json:"error,omitempty"`
	Relay completionRelay `json:"relay"`
}

type completionChoice struct {
	Index   int               `json:"index"`
	Message completionMessage `json:"message"`
	// Logprobs has the entries of every chunk, in order (wire.MergeLogprobs).
	Logprobs json.RawMessage `json:"logprobs,omitempty"`
	// FinishReason is null for a cut answer: none of OpenAI's reasons
	// (stop, length, ...) would be true of it.
	FinishReason *string `json:"finish_reason"`
}

type completionMessage struct {
	Role string `json:"role"`
	// Content is null when the answer is only tool calls, as OpenAI sends it.
	Content     *string           `json:"content"`
	Reasoning   string            `json:"reasoning_content,omitempty"`
	Refusal     *string           `json:"refusal,omitempty"`
	ToolCalls   []chat.ToolCall   `json:"tool_calls,omitempty"`
	Annotations []json.RawMessage `json:"annotations,omitempty"`
}

type completionRelay struct {
	endRelay
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// LogprobsGap says that some chunk's logprobs were dropped
	// (wire.Frame.LogprobsGap).
	LogprobsGap bool `json:"logprobs_gap,omitempty"`
}

// toolCallDelta is a streamed fragment of a tool call: the call is named by
// index, its arguments split across chunks.
type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function chat.Function `json:"function"`
}

func (c *completion) add(f wire.Frame) error {
	c.content.WriteString(f.Content)
	c.reasoning.WriteString(f.Reasoning)
	c.refusal.WriteString(f.Refusal)
	if f.Provider != "" {
		c.provider, c.model = f.Provider, f.Model
	}
	if len(f.Logprobs) > 0 {
		c.logprobs = append(c.logprobs, f.Logprobs)
	}
	c.logprobsGap = c.logprobsGap || f.LogprobsGap
	c.fingerprint = cmp.Or(f.SystemFingerprint, c.fingerprint)
	if len(f.Annotations) > 0 {
		var as []json.RawMessage
		if err := json.Unmarshal(f.Annotations, &as); err != nil {
			return fmt.Errorf("edge: chunk %d: annotations: %w", f.Seq, err)
		}
		c.annotations = append(c.annotations, as...)
	}
	if len(f.ToolCalls) == 0 {
		return nil
	}
	var deltas []toolCallDelta
	if err := json.Unmarshal(f.ToolCalls, &deltas); err != nil {
		return fmt.Errorf("edge: chunk %d: tool_calls: %w", f.Seq, err)
	}
	if c.toolCalls == nil {
		c.toolCalls = map[int]*chat.ToolCall{}
	}
	for _, d := range deltas {
		tc := c.toolCalls[d.Index]
		if tc == nil {
			tc = &chat.ToolCall{}
			c.toolCalls[d.Index] = tc
		}
		tc.ID = cmp.Or(d.ID, tc.ID)
		tc.Type = cmp.Or(d.Type, tc.Type)
		tc.Function.Name += d.Function.Name
		tc.Function.Arguments += d.Function.Arguments
	}
	return nil
}

func (c *completion) object(v view, end chunklog.Entry) completionObject {
	msg := completionMessage{Role: "assistant", Reasoning: c.reasoning.String(), Annotations: c.annotations}
	if refusal := c.refusal.String(); refusal != "" {
		msg.Refusal = &refusal
	}
	for _, i := range slices.Sorted(maps.Keys(c.toolCalls)) {
		msg.ToolCalls = append(msg.ToolCalls, *c.toolCalls[i])
	}
	if content := c.content.String(); content != "" || len(msg.ToolCalls) == 0 {
		msg.Content = &content
	}
	obj := completionObject{
		ID:                v.completionID(),
		Object:            "chat.completion",
		Created:           v.meta.Created,
		Model:             chat.AnsweredBy(&end.Frame, c.model, v.meta.Model),
		SystemFingerprint: c.fingerprint,
		Choices:           []completionChoice{{Message: msg, Logprobs: wire.MergeLogprobs(c.logprobs)}},
		Usage:             end.Frame.Usage,
		Relay:             completionRelay{endRelay: v.endRelay(end), Provider: c.provider, Model: c.model, LogprobsGap: c.logprobsGap},
	}
	if end.Frame.Status == wire.StatusDone {
		reason := finishReason(end.Frame)
		obj.Choices[0].FinishReason = &reason
	} else {
		e := chat.ErrorOf(endError(end.Frame))
		obj.Error = &e
	}
	return obj
}
