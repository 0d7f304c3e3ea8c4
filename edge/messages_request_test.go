package edge

import (
	"net/http"
	"testing"
)

// TestMessagesRequestErrors: the edge's checks of a Messages request (the
// model, and the chat checks of what it becomes) answer with the status,
// the code and the parameter Anthropic's clients know; the dialect's own
// checks keep the edge's codes.
func TestMessagesRequestErrors(t *testing.T) {
	served := limits{served: func(m string) bool { return m == "m" }, maxMessages: 2, maxTokens: 100}
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param, code string
		status                  int
	}{
		{"not JSON", `[1]`, "", CodeInvalidJSON, http.StatusBadRequest},
		{"unknown model", `{"model":"x","max_tokens":1,` + user + `}`, "model", CodeModelNotFound, http.StatusNotFound},
		{"unknown parameter", `{"model":"m","max_tokens":1,"frequency_penalty":1,` + user + `}`, "frequency_penalty", CodeUnsupportedParameter, http.StatusBadRequest},
		{"temperature above 1", `{"model":"m","max_tokens":1,"temperature":1.5,` + user + `}`, "temperature", CodeInvalidValue, http.StatusBadRequest},
		{"max_tokens over the cap", `{"model":"m","max_tokens":101,` + user + `}`, "max_tokens", CodeLimitExceeded, http.StatusBadRequest},
		{"too many messages", `{"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`,
			"messages", CodeLimitExceeded, http.StatusBadRequest},
		{"too many stop sequences", `{"model":"m","max_tokens":1,"stop_sequences":["a","b","c","d","e"],` + user + `}`, "stop_sequences", CodeInvalidValue, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := parseMessagesRequest([]byte(tc.body), served)
			if e == nil || e.Status != tc.status || e.Param != tc.param || e.Code != tc.code {
				t.Fatalf("error %+v, want status %d code %s param %q", e, tc.status, tc.code, tc.param)
			}
		})
	}
}
