package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/relaydev/relay/relay/wire"
)

// chatRequest is what the edge needs to know about a chat completion
// request. The body itself is forwarded to the worker untouched, so fields
// the edge does not know (tools, response_format, ...) reach the provider.
type chatRequest struct {
	Model  string
	Stream bool
	Body   json.RawMessage
	// FailFast: fail at once rather than wait for a provider that cannot
	// take the request now (HeaderFailFast). Not part of the body.
	FailFast bool
	// RequestID is the client's X-Request-Id (startOptions), which the
	// provider's calls carry. Not part of the body.
	RequestID string
}

// limits are what a request is checked against, besides its shape.
type limits struct {
	// served reports whether the relay serves a model (the catalog).
	served func(string) bool
	// allowed reports whether the caller may use a served model.
	allowed func(string) bool
	// maxMessages and maxTokens cap messages and max_tokens; negative: no
	// cap.
	maxMessages, maxTokens int
}

// limits of a request by p.
func (s *Server) limits(p principal) limits {
	return limits{served: s.catalog.Serves, allowed: p.allows, maxMessages: s.cfg.MaxMessages, maxTokens: s.cfg.MaxTokensCap}
}

// CodeLimitExceeded answers a request over one of the edge's limits
// (edge.max_messages, edge.max_tokens_cap).
const CodeLimitExceeded = "limit_exceeded"

// CodeUnsupportedMediaType answers a request body that is not declared
// JSON (415).
const CodeUnsupportedMediaType = "unsupported_media_type"

// checkJSONBody refuses a request body whose Content-Type is not
// application/json (parameters such as charset allowed). A browser sends
// text/plain, a form type, or none at all, cross-site and without a CORS
// preflight: accepted, any page a user of an anonymous edge visits could
// start generations on it. A page must declare JSON, which takes a
// preflight (cors.go); the OpenAI and Anthropic SDKs always do. A request
// that carries a credential header took a preflight already (neither
// Authorization nor x-api-key is a header a page may send without one), so
// its body is read as JSON whatever it is labelled, as clients that call
// a provider with `curl -d` and a key expect.
func checkJSONBody(r *http.Request) *wire.Error {
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	e := invalid("", CodeUnsupportedMediaType,
		"the request body must be JSON, sent with Content-Type: application/json (got %s); with curl, add -H 'Content-Type: application/json'", strconv.Quote(ct))
	e.Status = http.StatusUnsupportedMediaType
	return e
}

// readChatRequest reads and validates a request body of at most max bytes.
func readChatRequest(w http.ResponseWriter, r *http.Request, max int64, lim limits) (chatRequest, *wire.Error) {
	body, e := readBody(w, r, max)
	if e != nil {
		return chatRequest{}, e
	}
	return parseChatRequest(body, lim)
}

// parseChatRequest validates what the relay relies on and what would only
// fail at the provider (types and ranges of the common parameters, the
// edge's limits), and names the first field at fault the way OpenAI does
// (param "messages[2].role"). Nothing it refuses reaches JetStream. A
// valid request is accepted in one pass (request_scan.go); the rest is
// decodeChatRequest's.
func parseChatRequest(body []byte, lim limits) (chatRequest, *wire.Error) {
	if req, ok := scanChatRequest(body, lim); ok {
		return req, nil
	}
	return decodeChatRequest(body, lim)
}

// decodeChatRequest is parseChatRequest with encoding/json: it names what
// is wrong with a request, and decides what the one pass gives up on.
func decodeChatRequest(body []byte, lim limits) (chatRequest, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return chatRequest{}, invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	req := chatRequest{Body: bytes.TrimSpace(body)}

	raw, ok := fields["model"]
	if !ok {
		return chatRequest{}, invalid("model", CodeInvalidValue, "missing required parameter: 'model'")
	}
	if json.Unmarshal(raw, &req.Model) != nil || req.Model == "" {
		return chatRequest{}, invalid("model", CodeInvalidValue, "'model' must be a non-empty string")
	}
	// An unknown model and one the key may not use get the same answer:
	// OpenAI's 404, which SDKs raise as NotFoundError.
	if !lim.served(req.Model) || lim.allowed != nil && !lim.allowed(req.Model) {
		return chatRequest{}, modelNotFound(req.Model)
	}

	if e := checkMessages(fields["messages"], lim.maxMessages); e != nil {
		return chatRequest{}, e
	}

	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.Stream) != nil {
			return chatRequest{}, invalid("stream", CodeInvalidValue, "'stream' must be a boolean")
		}
	}
	// Chunks carry a single choice (index 0): a stream is one durable
	// answer, resumed and continued as one. n choices are n requests.
	if raw, ok := fields["n"]; ok && !isNull(raw) {
		var n int
		if json.Unmarshal(raw, &n) != nil || n != 1 {
			return chatRequest{}, invalid("n", CodeInvalidValue, "n must be 1: the relay serves one choice per request; send n requests for n choices")
		}
	}
	for _, p := range numberParams {
		if e := checkNumber(fields, p); e != nil {
			return chatRequest{}, e
		}
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if e := checkMaxTokens(fields, name, lim.maxTokens); e != nil {
			return chatRequest{}, e
		}
	}
	if e := checkOptional(fields); e != nil {
		return chatRequest{}, e
	}
	return req, nil
}

// numberParam is a numeric sampling parameter and its range.
type numberParam struct {
	name     string
	min, max float64
}

var numberParams = []numberParam{
	{"temperature", 0, 2},
	{"top_p", 0, 1},
	{"frequency_penalty", -2, 2},
	{"presence_penalty", -2, 2},
}

func checkNumber(fields map[string]json.RawMessage, p numberParam) *wire.Error {
	raw, ok := fields[p.name]
	if !ok || isNull(raw) {
		return nil
	}
	var v float64
	if json.Unmarshal(raw, &v) != nil {
		return invalid(p.name, CodeInvalidValue, "'%s' must be a number", p.name)
	}
	if v < p.min || v > p.max {
		return invalid(p.name, CodeInvalidValue, "'%s' must be between %g and %g, not %g", p.name, p.min, p.max, v)
	}
	return nil
}

func checkMaxTokens(fields map[string]json.RawMessage, name string, limit int) *wire.Error {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil
	}
	var v int64
	if json.Unmarshal(raw, &v) != nil || v < 1 {
		return invalid(name, CodeInvalidValue, "'%s' must be a positive integer", name)
	}
	if limit >= 0 && v > int64(limit) {
		return invalid(name, CodeLimitExceeded, "'%s' is %d; this relay allows at most %d", name, v, limit)
	}
	return nil
}

// checkOptional checks the types of other common parameters.
func checkOptional(fields map[string]json.RawMessage) *wire.Error {
	kinds := []struct {
		name string
		ok   func(json.RawMessage) bool
		want string
	}{
		{"stream_options", isObject, "an object"},
		{"stop", isStop, "a string or an array of at most 4 strings"},
		{"user", isString, "a string"},
		{"seed", isInteger, "an integer"},
		{"tools", isArray, "an array"},
		{"response_format", isObject, "an object"},
		{"logprobs", isBool, "a boolean"},
	}
	for _, k := range kinds {
		if raw, ok := fields[k.name]; ok && !isNull(raw) && !k.ok(raw) {
			return invalid(k.name, CodeInvalidValue, "'%s' must be %s", k.name, k.want)
		}
	}
	return nil
}

// roles a message may have.
var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

func checkMessages(raw json.RawMessage, max int) *wire.Error {
	if raw == nil {
		return invalid("messages", CodeInvalidValue, "missing required parameter: 'messages'")
	}
	var messages []json.RawMessage
	if json.Unmarshal(raw, &messages) != nil || len(messages) == 0 {
		return invalid("messages", CodeInvalidValue, "'messages' must be a non-empty array")
	}
	if max >= 0 && len(messages) > max {
		return invalid("messages", CodeLimitExceeded, "'messages' has %d messages; this relay allows at most %d", len(messages), max)
	}
	for i, m := range messages {
		var msg map[string]json.RawMessage
		if json.Unmarshal(m, &msg) != nil || msg == nil {
			return invalid(fmt.Sprintf("messages[%d]", i), CodeInvalidValue, "messages[%d] must be an object", i)
		}
		var role string
		if json.Unmarshal(msg["role"], &role) != nil || role == "" {
			return invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue, "messages[%d].role must be a non-empty string", i)
		}
		if !roles[role] {
			return invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue,
				"messages[%d].role %q is not system, developer, user, assistant, tool or function", i, role)
		}
		if e := checkContent(msg["content"], role, i); e != nil {
			return e
		}
	}
	return nil
}

// checkContent: a string, or an array of parts that are objects with a
// type; only an assistant message (with tool calls) may have none.
func checkContent(raw json.RawMessage, role string, i int) *wire.Error {
	param := fmt.Sprintf("messages[%d].content", i)
	if raw == nil || isNull(raw) {
		if role == "assistant" {
			return nil
		}
		return invalid(param, CodeInvalidValue, "%s is required", param)
	}
	if isString(raw) {
		return nil
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return invalid(param, CodeInvalidValue, "%s must be a string or an array of content parts", param)
	}
	for j, part := range parts {
		var typ string
		if part == nil || json.Unmarshal(part["type"], &typ) != nil || typ == "" {
			return invalid(fmt.Sprintf("%s[%d].type", param, j), CodeInvalidValue, "%s[%d] must be an object with a type", param, j)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func isString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil
}

func isBool(raw json.RawMessage) bool {
	var b bool
	return json.Unmarshal(raw, &b) == nil
}

func isInteger(raw json.RawMessage) bool {
	var n int64
	return json.Unmarshal(raw, &n) == nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func isArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && a != nil
}

func isStop(raw json.RawMessage) bool {
	if isString(raw) {
		return true
	}
	var a []string
	return json.Unmarshal(raw, &a) == nil && len(a) <= 4
}
