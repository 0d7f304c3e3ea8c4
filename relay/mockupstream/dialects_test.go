package mockupstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/upstream"
)

// relayStream reads, through the relay's own client in dialect d, the
// answer to a chat request of messages: what the mock says in each
// dialect, as the relay understands it.
func relayStream(t *testing.T, ts *httptest.Server, d upstream.Dialect, key string, messages []Message, extra ...any) (string, string, *chat.Usage, error) {
	t.Helper()
	body, _ := json.Marshal(chatBody(true, messages, extra...))
	s, err := upstream.NewClient(nil).Stream(t.Context(), upstream.Target{Provider: "mock", BaseURL: ts.URL + "/v1", APIKey: key, Dialect: d}, body)
	if err != nil {
		return "", "", nil, err
	}
	defer s.Close()
	var text strings.Builder
	var usage *chat.Usage
	for {
		delta, err := s.Next()
		if errors.Is(err, io.EOF) {
			return text.String(), s.FinishReason(), usage, nil
		}
		if err != nil {
			return text.String(), s.FinishReason(), usage, err
		}
		text.WriteString(delta.Content)
		if delta.Usage != nil {
			usage = delta.Usage
		}
	}
}

var dialects = []upstream.Dialect{upstream.DialectAnthropic, upstream.DialectResponses}

func TestDialectsGiveTheChatAnswer(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			s, ts := newTestServer(t, fullSpeed(30))
			msgs := conv("same answer everywhere")
			text, finish, usage, err := relayStream(t, ts, d, "", msgs)
			if err != nil || text != AnswerText(msgs, 30) || finish != "stop" {
				t.Fatalf("got %q, finish %q, err %v; want the chat answer %q", text, finish, err, AnswerText(msgs, 30))
			}
			if usage == nil || usage.CompletionTokens != 30 || usage.PromptTokens == 0 {
				t.Errorf("usage = %+v, want 30 completion tokens and a prompt", usage)
			}
			text, finish, _, err = relayStream(t, ts, d, "", msgs, "max_tokens", 20)
			if err != nil || text != strings.Join(Answer(msgs, 30)[:20], "") || finish != "length" {
				t.Errorf("with max_tokens 20: %q, finish %q, err %v", text, finish, err)
			}
			st := s.Stats()
			if st.ByConversation[ConversationKey(msgs)] != 2 || st.ChatRequests != 0 || st.MessagesRequests+st.ResponsesRequests != 2 {
				t.Errorf("stats = %+v, want 2 requests of the conversation, none of them chat", st)
			}
		})
	}
}

func TestDialectsContinue(t *testing.T) {
	for _, tc := range []struct {
		d    upstream.Dialect
		cont func(prefix string) []Message
	}{
		// Anthropic extends a prefill; the relay cuts its trailing
		// whitespace, which the mock's answer then restates.
		{upstream.DialectAnthropic, func(prefix string) []Message { return []Message{{Role: roleAssistant, Content: prefix}} }},
		{upstream.DialectResponses, func(prefix string) []Message {
			return []Message{{Role: roleAssistant, Content: prefix}, {Role: roleUser, Content: "Continue exactly."}}
		}},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			_, ts := newTestServer(t, fullSpeed(10))
			msgs := conv("continue me")
			full := AnswerText(msgs, 10)
			half := len(full) / 2
			for !utf8.RuneStart(full[half]) {
				half--
			}
			for _, cut := range []int{1, len(Answer(msgs, 10)[0]), half} {
				text, _, _, err := relayStream(t, ts, tc.d, "", with(msgs, tc.cont(full[:cut])...))
				if err != nil || full[:cut]+text != full {
					t.Fatalf("cut %d: %q + %q (err %v), want %q", cut, full[:cut], text, err, full)
				}
			}
		})
	}
}

// error_after sends each dialect's error event for an overloaded provider
// mid-answer: the relay's client reads it as the provider's error, one to
// retry, after the tokens before it.
func TestErrorAfterInEveryDialect(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(8))
	for _, d := range append([]upstream.Dialect{upstream.DialectChat}, dialects...) {
		t.Run(string(d), func(t *testing.T) {
			msgs := conv("overloaded " + string(d) + " [[mock: error_after=3]]")
			text, finish, _, err := relayStream(t, ts, d, "", msgs)
			var oe *chat.Error
			if !errors.As(err, &oe) || !strings.Contains(oe.Message, "Overloaded") || upstream.Classify(err) != upstream.Transient {
				t.Fatalf("err = %v (class %v), want the provider's overloaded error, transient", err, upstream.Classify(err))
			}
			if want := strings.Join(Answer(msgs, 8)[:3], ""); text != want || finish != "" {
				t.Errorf("before the error: %q, finish %q; want %q and no finish", text, finish, want)
			}
		})
	}
}

func TestAnthropicRefusesTrailingWhitespace(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(4))
	resp := post(t, ts, "/v1/messages", "", map[string]any{"model": "mock-1", "max_tokens": 10,
		"messages": []map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello "}}})
	wantClaudeError(t, resp, http.StatusBadRequest, "invalid_request_error")
}

func TestAnthropicFaultsAndErrors(t *testing.T) {
	_, ts := newTestServer(t, Config{Tokens: 8, TokenInterval: -1, APIKeys: []string{"sk-ant"}})
	hi := map[string]any{"model": "mock-1", "max_tokens": 10, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	wantClaudeError(t, post(t, ts, "/v1/messages", "wrong", hi), http.StatusUnauthorized, "authentication_error")

	for _, tc := range []struct {
		directive string
		status    int
		typ       string
	}{
		{"[[mock: status=429, retry_after=3]]", 429, "rate_limit_error"},
		{"[[mock: status=529]]", 529, "overloaded_error"},
		{"[[mock: status=500]]", 500, "api_error"},
	} {
		_, _, _, err := relayStream(t, ts, upstream.DialectAnthropic, "sk-ant", conv("x "+tc.directive))
		var se *upstream.StatusError
		if !errors.As(err, &se) || se.Status != tc.status || se.Err.Type != tc.typ {
			t.Errorf("%s: err = %v, want status %d of type %s", tc.directive, err, tc.status, tc.typ)
		}
		if tc.status == 429 && se != nil && se.RetryAfter.Seconds() != 3 {
			t.Errorf("retry after = %v, want 3s", se.RetryAfter)
		}
	}
	msgs := conv("cut me [[mock: cut_after=3]]")
	text, finish, _, err := relayStream(t, ts, upstream.DialectAnthropic, "sk-ant", msgs)
	if !errors.Is(err, upstream.ErrTruncated) || finish != "" || text != strings.Join(Answer(msgs, 8)[:3], "") {
		t.Errorf("cut_after=3: %q, finish %q, err %v; want 3 tokens and a truncated stream", text, finish, err)
	}
	_, finish, _, err = relayStream(t, ts, upstream.DialectAnthropic, "sk-ant", conv("no stop [[mock: no_done]]"))
	if !errors.Is(err, io.EOF) && err != nil || finish != "stop" {
		t.Errorf("no_done: finish %q, err %v; want a whole answer without message_stop", finish, err)
	}
}

func TestDialectsNonStreaming(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(6))
	msgs := conv("whole")
	want := AnswerText(msgs, 6)

	resp := post(t, ts, "/v1/messages", "", map[string]any{"model": "mock-1", "max_tokens": 100, "system": "You are a mock.",
		"messages": []map[string]any{{"role": "user", "content": []map[string]string{{"type": "text", "text": "whole"}}}}})
	var m struct {
		Content    []claudeBlock `json:"content"`
		StopReason *string       `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 || len(m.Content) != 1 || m.Content[0].Text != want || *m.StopReason != "end_turn" {
		t.Errorf("messages: status %d, %+v (%v); want the answer %q", resp.StatusCode, m, err, want)
	}
	resp = post(t, ts, "/v1/responses", "", map[string]any{"model": "mock-1", "instructions": "You are a mock.", "input": "whole"})
	var r responseObject
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.Status != "completed" || r.Output[0].Content[0].Text != want {
		t.Errorf("responses: status %d, %+v (%v); want the answer %q", resp.StatusCode, r, err, want)
	}
}

func TestResponsesUnknownModel(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(4))
	resp := post(t, ts, "/v1/responses", "", map[string]any{"model": "nope", "input": "hi"})
	if e := decodeError(t, resp, http.StatusNotFound); e.Error.Code == nil || *e.Error.Code != "model_not_found" {
		t.Errorf("error = %+v, want code model_not_found", e)
	}
}

// wantClaudeError checks an error response of Anthropic's shape.
func wantClaudeError(t *testing.T, resp *http.Response, status int, typ string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != status || body.Type != "error" || body.Error.Type != typ || body.Error.Message == "" {
		t.Errorf("response: status %d, %+v (%v); want %d with an error of type %s", resp.StatusCode, body, err, status, typ)
	}
}

func TestDialectsRefuseWhatTheContextWindowCannotHold(t *testing.T) {
	_, ts := newTestServer(t, Config{Tokens: 8, TokenInterval: -1, ContextWindows: map[string]int{"mock-1": 30}})
	long := conv(strings.Repeat("many words ", 20))
	for _, d := range []upstream.Dialect{upstream.DialectChat, upstream.DialectAnthropic, upstream.DialectResponses} {
		for _, limit := range []int{10, 28} {
			_, _, _, err := relayStream(t, ts, d, "", conv("a short prompt"), "max_tokens", limit)
			if limit == 10 && err != nil {
				t.Errorf("%s: a request that fits: %v", d, err)
			}
			if limit == 28 {
				needed, tooLong := upstream.TooLong(err)
				if want := promptTokens(conv("a short prompt")) + limit; !tooLong || needed != want {
					t.Errorf("%s: err = %v (too long: %v, %d tokens); want one the relay reads as too long, %d tokens", d, err, tooLong, needed, want)
				}
			}
		}
		_, _, _, err := relayStream(t, ts, d, "", long, "max_tokens", 10)
		var se *upstream.StatusError
		needed, tooLong := upstream.TooLong(err)
		if !errors.As(err, &se) || se.Status != http.StatusBadRequest || !tooLong || needed < promptTokens(long) {
			t.Errorf("%s: err = %v (too long: %v, %d tokens); want a 400 the relay reads as too long, at least %d tokens", d, err, tooLong, needed, promptTokens(long))
		}
		if _, _, _, err := relayStream(t, ts, d, "", long, "model", "mock-2", "max_tokens", 10); err != nil {
			t.Errorf("%s: a model without a window refused a long request: %v", d, err)
		}
	}
}
