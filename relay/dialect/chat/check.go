package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// Codes of the errors the checks of every dialect answer (CheckRequest
// here, the other dialects' translations to chat). Clients branch on
// them, so they are part of the API.
const (
	CodeInvalidJSON  = "invalid_json"
	CodeInvalidValue = "invalid_value"
	// CodeUnsupportedParameter refuses a parameter the relay cannot
	// honour over a chat-completions upstream.
	CodeUnsupportedParameter = "unsupported_parameter"
	// CodeLimitExceeded answers a request over one of the Limits.
	CodeLimitExceeded = "limit_exceeded"
	CodeModelNotFound = "model_not_found"
)

// Limits are what a request is checked against, besides its shape.
type Limits struct {
	// Served reports whether the relay serves a model (the catalog).
	Served func(string) bool
	// Allowed reports whether the caller may use a served model; nil: any.
	Allowed func(string) bool
	// MaxMessages and MaxTokens cap messages and max_tokens; negative: no
	// cap.
	MaxMessages, MaxTokens int
}

// serves reports whether model is served and the caller may use it.
func (l Limits) serves(model string) bool {
	return l.Served(model) && (l.Allowed == nil || l.Allowed(model))
}

// Checked is what the relay relies on of a request CheckRequest accepted.
// The body itself is forwarded untouched, so fields the relay does not
// know (tools, response_format, ...) reach the provider.
type Checked struct {
	Model  string
	Stream bool
	// Body is the request's body without the white space around it.
	Body json.RawMessage
}

// Invalid is a 400 invalid_request_error naming the parameter at fault.
func Invalid(param, code, format string, args ...any) *wire.Error {
	return &wire.Error{
		Message: fmt.Sprintf(format, args...),
		Type:    wire.TypeInvalidRequest,
		Param:   param,
		Code:    code,
		Status:  http.StatusBadRequest,
	}
}

// ModelNotFound is OpenAI's 404 for a model: one the relay does not serve
// and one the caller's key may not use get the same answer, so that an
// error never reveals which models other keys have.
func ModelNotFound(model string) *wire.Error {
	e := Invalid("model", CodeModelNotFound, "the model %q does not exist or you do not have access to it", model)
	e.Status = http.StatusNotFound
	return e
}

// CheckRequest validates what the relay relies on of a chat completion
// request and what would only fail at the provider (types and ranges of
// the common parameters, lim) or must not be handed (text that is not
// UTF-8, images from anywhere but https: and data:), and names the first
// field at fault the way OpenAI does (param "messages[2].role"). A valid
// request is accepted in one pass (check_scan.go); the rest is
// decodeRequest's.
func CheckRequest(body []byte, lim Limits) (Checked, *wire.Error) {
	if req, ok := scanRequest(body, lim); ok {
		return req, nil
	}
	return decodeRequest(body, lim)
}

// decodeRequest is CheckRequest with encoding/json: it names what is
// wrong with a request, and decides what the one pass gives up on.
func decodeRequest(body []byte, lim Limits) (Checked, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Checked{}, Invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	req := Checked{Body: bytes.TrimSpace(body)}

	raw, ok := fields["model"]
	if !ok {
		return Checked{}, Invalid("model", CodeInvalidValue, "missing required parameter: 'model'")
	}
	if json.Unmarshal(raw, &req.Model) != nil || req.Model == "" {
		return Checked{}, Invalid("model", CodeInvalidValue, "'model' must be a non-empty string")
	}
	// An unknown model and one the key may not use get the same answer:
	// OpenAI's 404, which SDKs raise as NotFoundError.
	if !lim.serves(req.Model) {
		return Checked{}, ModelNotFound(req.Model)
	}
	if e := CheckText(body, Indexed); e != nil {
		return Checked{}, e
	}

	if e := checkMessages(fields["messages"], lim.MaxMessages); e != nil {
		return Checked{}, e
	}

	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.Stream) != nil {
			return Checked{}, Invalid("stream", CodeInvalidValue, "'stream' must be a boolean")
		}
	}
	// Chunks carry a single choice (index 0): a stream is one durable
	// answer, resumed and continued as one. n choices are n requests.
	if raw, ok := fields["n"]; ok && !isNull(raw) {
		var n int
		if json.Unmarshal(raw, &n) != nil || n != 1 {
			return Checked{}, Invalid("n", CodeInvalidValue, "n must be 1: the relay serves one choice per request; send n requests for n choices")
		}
	}
	for _, p := range numberParams {
		if e := checkNumber(fields, p); e != nil {
			return Checked{}, e
		}
	}
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if e := CheckMaxTokens(fields, name, lim.MaxTokens); e != nil {
			return Checked{}, e
		}
	}
	if e := checkOptional(fields); e != nil {
		return Checked{}, e
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
		return Invalid(p.name, CodeInvalidValue, "'%s' must be a number", p.name)
	}
	if v < p.min || v > p.max {
		return Invalid(p.name, CodeInvalidValue, "'%s' must be between %g and %g, not %g", p.name, p.min, p.max, v)
	}
	return nil
}

// CheckMaxTokens checks the member name of a request's fields, if set, as
// a max_tokens: a positive integer within limit (negative: no limit).
func CheckMaxTokens(fields map[string]json.RawMessage, name string, limit int) *wire.Error {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil
	}
	var v int64
	if json.Unmarshal(raw, &v) != nil || v < 1 {
		return Invalid(name, CodeInvalidValue, "'%s' must be a positive integer", name)
	}
	if limit >= 0 && v > int64(limit) {
		return Invalid(name, CodeLimitExceeded, "'%s' is %d; this relay allows at most %d", name, v, limit)
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
			return Invalid(k.name, CodeInvalidValue, "'%s' must be %s", k.name, k.want)
		}
	}
	return nil
}

// roles a message may have.
var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

func checkMessages(raw json.RawMessage, max int) *wire.Error {
	if raw == nil {
		return Invalid("messages", CodeInvalidValue, "missing required parameter: 'messages'")
	}
	var messages []json.RawMessage
	if json.Unmarshal(raw, &messages) != nil || len(messages) == 0 {
		return Invalid("messages", CodeInvalidValue, "'messages' must be a non-empty array")
	}
	if max >= 0 && len(messages) > max {
		return Invalid("messages", CodeLimitExceeded, "'messages' has %d messages; this relay allows at most %d", len(messages), max)
	}
	for i, m := range messages {
		var msg map[string]json.RawMessage
		if json.Unmarshal(m, &msg) != nil || msg == nil {
			return Invalid(fmt.Sprintf("messages[%d]", i), CodeInvalidValue, "messages[%d] must be an object", i)
		}
		var role string
		if json.Unmarshal(msg["role"], &role) != nil || role == "" {
			return Invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue, "messages[%d].role must be a non-empty string", i)
		}
		if !roles[role] {
			return Invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue,
				"messages[%d].role %q is not system, developer, user, assistant, tool or function", i, role)
		}
		if e := checkContent(msg["content"], role, i); e != nil {
			return e
		}
	}
	return nil
}

// checkContent: a string, or an array of parts that are objects with a
// type; only an assistant message (with tool calls) may have none. A part
// of type image_url, and one of any type with an image_url, must have an
// image the provider may fetch (checkImage): a provider may read a type
// given twice otherwise than encoding/json does.
func checkContent(raw json.RawMessage, role string, i int) *wire.Error {
	param := fmt.Sprintf("messages[%d].content", i)
	if isNull(raw) {
		if role == "assistant" {
			return nil
		}
		return Invalid(param, CodeInvalidValue, "%s is required", param)
	}
	if isString(raw) {
		return nil
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return Invalid(param, CodeInvalidValue, "%s must be a string or an array of content parts", param)
	}
	for j, part := range parts {
		var typ string
		if part == nil || json.Unmarshal(part["type"], &typ) != nil || typ == "" {
			return Invalid(fmt.Sprintf("%s[%d].type", param, j), CodeInvalidValue, "%s[%d] must be an object with a type", param, j)
		}
		if image, ok := part["image_url"]; ok || typ == "image_url" {
			if e := checkImage(image, fmt.Sprintf("%s[%d].image_url", param, j)); e != nil {
				return e
			}
		}
	}
	return nil
}

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
