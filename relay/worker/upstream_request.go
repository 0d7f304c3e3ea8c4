package worker

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// modelNotServed is the error of a request for a model no provider serves
// (the edge checks this too, but its catalog may be older than ours).
func modelNotServed(model string) *wire.Error {
	return &wire.Error{
		Message: fmt.Sprintf("The model `%s` is not served by any configured provider.", model),
		Type:    wire.TypeInvalidRequest,
		Code:    "model_not_found",
		Param:   "model",
		Status:  http.StatusNotFound,
	}
}

// continuation is what an attempt asks the provider to continue: the
// text already published, and how to ask for the rest. The zero value asks
// for a fresh answer.
type continuation struct {
	text   string
	tokens int // in text: a limit on the answer's tokens is reduced by them
	mode   provider.Continuation
	prompt string // the user message of prompt mode
}

// upstreamBody turns the client's chat completion request into the
// provider's. Every field the client sent is kept, known to the relay or
// not, so new provider features pass through. The relay always streams and
// always asks for usage, which it reports in the end frame.
//
// A continuation with text continues an answer earlier attempts published:
// the text is sent as an assistant message which, in prefill mode, the
// provider extends, and which in prompt mode is followed by a user message
// asking to continue it. The client's limits on the answer's tokens
// (max_tokens, max_completion_tokens) are reduced by the tokens of the
// text, so the whole answer keeps within them; the attempt loop ends a
// stream whose limit is spent before it gets here (tokenLimit).
//
// A fresh answer's body is usually the client's with three members set,
// which spliceBody writes in one pass; decodeBody is the general way.
func upstreamBody(clientBody json.RawMessage, model string, cont continuation) ([]byte, error) {
	if cont.text == "" {
		if b, ok := spliceBody(clientBody, model); ok {
			return b, nil
		}
	}
	return decodeBody(clientBody, model, cont)
}

// decodeBody is upstreamBody with encoding/json.
func decodeBody(clientBody json.RawMessage, model string, cont continuation) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(clientBody, &body); err != nil || body == nil {
		return nil, badBody("the request body is not a JSON object")
	}
	var opts map[string]json.RawMessage
	if raw, ok := body["stream_options"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, badBody("stream_options is not an object")
		}
	}
	if opts == nil {
		opts = map[string]json.RawMessage{}
	}
	opts["include_usage"] = json.RawMessage("true")
	body["stream_options"] = mustJSON(opts)
	body["stream"] = json.RawMessage("true")
	body["model"] = mustJSON(model)
	if cont.text != "" {
		var messages []json.RawMessage
		if err := json.Unmarshal(body["messages"], &messages); err != nil {
			return nil, badBody("messages is not an array")
		}
		messages = continued(messages, cont.text)
		if cont.mode == provider.Prompt {
			messages = append(messages, mustJSON(map[string]string{"role": "user", "content": cont.prompt}))
		}
		body["messages"] = mustJSON(messages)
		for _, field := range tokenLimitFields {
			var n int
			if json.Unmarshal(body[field], &n) == nil && n > 0 {
				body[field] = mustJSON(max(n-cont.tokens, 1))
			}
		}
	}
	return mustJSON(body), nil
}

// continued adds the text an attempt continues to the messages: as a new
// assistant message, or, when the client's own request ends with an
// assistant message of text (a prefill, which Anthropic's Messages API
// offers its clients: the answer continues it), appended to that one, so
// that the provider is asked to continue the prefill and the text as one
// answer; two assistant messages in a row are no prefill to every
// provider.
func continued(messages []json.RawMessage, text string) []json.RawMessage {
	if n := len(messages); n > 0 {
		var last map[string]json.RawMessage
		var role, content string
		if json.Unmarshal(messages[n-1], &last) == nil && json.Unmarshal(last["role"], &role) == nil && role == "assistant" &&
			json.Unmarshal(last["content"], &content) == nil && len(last["tool_calls"]) == 0 {
			last["content"] = mustJSON(content + text)
			return append(messages[:n-1:n-1], mustJSON(last))
		}
	}
	return append(messages, mustJSON(map[string]string{"role": "assistant", "content": text}))
}

// tokenLimitFields are the request fields that bound the tokens of an
// answer: max_tokens, and the newer name OpenAI gives it.
var tokenLimitFields = [...]string{"max_tokens", "max_completion_tokens"}

// tokenLimit returns the smallest positive limit the request sets on the
// answer's tokens, if any. The fields are found in one pass (scanLimits)
// unless that gives up.
func tokenLimit(clientBody json.RawMessage) (int, bool) {
	fields, scanned := scanLimits(clientBody)
	if !scanned {
		var body map[string]json.RawMessage
		if json.Unmarshal(clientBody, &body) != nil {
			return 0, false
		}
		for i, field := range tokenLimitFields {
			fields[i] = body[field]
		}
	}
	limit, ok := 0, false
	for _, raw := range fields {
		var n int
		if json.Unmarshal(raw, &n) == nil && n > 0 && (!ok || n < limit) {
			limit, ok = n, true
		}
	}
	return limit, ok
}

func badBody(msg string) *wire.Error {
	return &wire.Error{Message: msg, Type: wire.TypeInvalidRequest, Status: http.StatusBadRequest}
}

// mustJSON marshals values that cannot fail to marshal: strings, maps of
// raw JSON that was itself just parsed.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("worker: marshal %T: %v", v, err))
	}
	return b
}

// target is the provider of candidate c called with key for the job's
// request, with the request's ids in the headers it names
// (provider.RequestHeadersFor): the same on every call of the stream.
func (j *job) target(c *provider.Candidate, key string) upstream.Target {
	t := c.Provider.Target(key)
	t.Headers = c.Provider.RequestHeadersFor(provider.CallIDs{StreamID: j.req.StreamID, RequestID: j.req.RequestID, Tenant: j.req.Tenant})
	return t
}
