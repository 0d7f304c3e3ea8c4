package relay

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
)

// chooseTarget picks the endpoint an attempt calls: the first provider that
// serves model, with its first key. Fallback chains and key rotation will
// choose among the others.
func chooseTarget(c *provider.Catalog, model string) (upstream.Target, error) {
	providers := c.For(model)
	if len(providers) == 0 {
		return upstream.Target{}, &protocol.Error{
			Message: fmt.Sprintf("The model `%s` is not served by any configured provider.", model),
			Type:    protocol.TypeInvalidRequest,
			Code:    "model_not_found",
			Param:   "model",
			Status:  http.StatusNotFound,
		}
	}
	p := providers[0]
	t := upstream.Target{Provider: p.Name, BaseURL: p.BaseURL}
	if len(p.APIKeys) > 0 {
		t.APIKey = p.APIKeys[0]
	}
	return t, nil
}

// upstreamBody turns the client's chat completion request into the
// provider's. Every field the client sent is kept, known to the relay or
// not, so new provider features pass through. The relay always streams and
// always asks for usage, which it reports in the end frame.
//
// A non-empty prefill continues an answer an earlier attempt published: it
// is sent as a final assistant message, which the provider extends.
func upstreamBody(clientBody json.RawMessage, model, prefill string) ([]byte, error) {
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
	if prefill != "" {
		var messages []json.RawMessage
		if err := json.Unmarshal(body["messages"], &messages); err != nil {
			return nil, badBody("messages is not an array")
		}
		messages = append(messages, mustJSON(map[string]string{"role": "assistant", "content": prefill}))
		body["messages"] = mustJSON(messages)
	}
	return mustJSON(body), nil
}

func badBody(msg string) *protocol.Error {
	return &protocol.Error{Message: msg, Type: protocol.TypeInvalidRequest, Status: http.StatusBadRequest}
}

// mustJSON marshals values that cannot fail to marshal: strings, maps of
// raw JSON that was itself just parsed.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("relay: marshal %T: %v", v, err))
	}
	return b
}
