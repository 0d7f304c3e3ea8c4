package worker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// unanswering are the members of a chat completion request that do not
// change its answer: how it is delivered (stream, stream_options), who
// asks (user, safety_identifier, metadata) and what the provider keeps
// (store, prompt_cache_key, prompt_cache_retention). Two requests that
// differ only in them share a kept answer.
var unanswering = []string{
	"stream", "stream_options", "user", "safety_identifier", "metadata",
	"store", "prompt_cache_key", "prompt_cache_retention",
}

// answerKey is the wire.AnswerBucket key of a request of tenant for model
// with body: the hex SHA-256 of the three, the body in a canonical form
// (members sorted, numbers in their shortest form, null members and the
// unanswering ones left out), so that the same request sent differently
// finds the same answer, and another tenant's never does.
func answerKey(tenant, model string, body json.RawMessage) (string, error) {
	var req map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&req); err != nil {
		return "", fmt.Errorf("worker: answer key: %w", err)
	}
	for _, m := range unanswering {
		delete(req, m)
	}
	for m, v := range req {
		if v == nil {
			delete(req, m)
		}
	}
	canon, err := json.Marshal(canonical(req))
	if err != nil {
		return "", fmt.Errorf("worker: answer key: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(tenant), []byte(model), canon} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// canonical rewrites the numbers in v in their shortest form, so that 0,
// 0.0 and 0e0 are one temperature. Objects need nothing: encoding/json
// writes map members sorted.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = canonical(e)
		}
	case []any:
		for i, e := range v {
			v[i] = canonical(e)
		}
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return v
		}
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return v
}

// deterministic reports whether body asks for temperature 0, the requests
// a prefer-mode cache answers before calling a provider.
func deterministic(body json.RawMessage) bool {
	var req struct {
		Temperature *float64 `json:"temperature"`
	}
	return json.Unmarshal(body, &req) == nil && req.Temperature != nil && *req.Temperature == 0
}
