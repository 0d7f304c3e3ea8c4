package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFaultStatus(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	resp := post(t, ts, "/v1/chat/completions", "", chatBody(true, conv("[[mock: status=429, retry_after=2, retry_after_ms=1500]]")))
	e := decodeError(t, resp, http.StatusTooManyRequests)
	if resp.Header.Get("Retry-After") != "2" || resp.Header.Get("retry-after-ms") != "1500" {
		t.Fatalf("Retry-After %q, retry-after-ms %q", resp.Header.Get("Retry-After"), resp.Header.Get("retry-after-ms"))
	}
	if e.Error.Type != "requests" || e.Error.Code == nil || *e.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("429 error = %+v", e)
	}
	if e := decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(false, conv("[[mock: status=503]]"))), http.StatusServiceUnavailable); e.Error.Type != "server_error" {
		t.Fatalf("503 error type = %q, want server_error", e.Error.Type)
	}
}

func TestFaultCutAfter(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("[[mock: cut_after=3]]")
	r := stream(t, ts, chatBody(true, msgs))
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("body ended with %v, want an unexpected EOF", r.err)
	}
	if r.text() != AnswerText(msgs, 3) || r.finish() != "" || r.done {
		t.Fatalf("text %q, finish %q, done %v; want 3 tokens and nothing else", r.text(), r.finish(), r.done)
	}
	// times defaults to 1: the retry, here a prefill continuation, is clean.
	r = stream(t, ts, chatBody(true, with(msgs, Message{Role: roleAssistant, Content: AnswerText(msgs, 3)})))
	if r.err != nil || !r.done || AnswerText(msgs, 3)+r.text() != AnswerText(msgs, 10) {
		t.Fatalf("continuation after the cut: err %v, done %v, text %q", r.err, r.done, r.text())
	}
}

func TestFaultEOFAfter(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("[[mock: eof_after=4]]")
	r := stream(t, ts, chatBody(true, msgs))
	if r.err != nil || r.text() != AnswerText(msgs, 4) || r.finish() != "" || r.done || r.usage() != nil {
		t.Fatalf("err %v, text %q, finish %q, done %v; want a clean end after 4 tokens", r.err, r.text(), r.finish(), r.done)
	}
}

func TestFaultMalformedAfter(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("[[mock: malformed_after=2]]")
	r := stream(t, ts, chatBody(true, msgs))
	if r.err != nil || r.text() != AnswerText(msgs, 2) || len(r.malformed) != 1 || r.done || r.finish() != "" {
		t.Fatalf("err %v, text %q, malformed %q, done %v", r.err, r.text(), r.malformed, r.done)
	}
}

func TestFaultNoDone(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	r := stream(t, ts, chatBody(true, conv("[[mock: no_done]]")))
	if r.err != nil || r.done || r.finish() != "stop" || r.usage() == nil {
		t.Fatalf("err %v, done %v, finish %q, usage %v; want finish and usage but no [DONE]", r.err, r.done, r.finish(), r.usage())
	}
}

func TestFaultEndingBeyondAnswerDoesNotFire(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	r := stream(t, ts, chatBody(true, conv("[[mock: cut_after=5]]")))
	if !errors.Is(r.err, io.ErrUnexpectedEOF) || len(r.content()) != 5 || r.finish() != "" {
		t.Fatalf("cut_after=5 of 5: err %v, %d chunks, finish %q; want a cut after the last token", r.err, len(r.content()), r.finish())
	}
	r = stream(t, ts, chatBody(true, conv("[[mock: cut_after=6]]")))
	if r.err != nil || !r.done || r.finish() != "stop" {
		t.Fatalf("cut_after=6 of 5: err %v, done %v; want a normal stream", r.err, r.done)
	}
}

// TestFaultSplitUTF8 checks over HTTP that a client reassembles the text, and
// with a recorder that the writes really end inside characters while adding
// up to the same bytes as an unsplit stream.
func TestFaultSplitUTF8(t *testing.T) {
	msgs := conv("split me")
	_, ts := newTestServer(t, Config{Tokens: 12, TokenInterval: -1, Faults: "split_utf8, times=0"})
	if r := stream(t, ts, chatBody(true, msgs)); r.err != nil || !r.done || r.text() != AnswerText(msgs, 12) {
		t.Fatalf("err %v, done %v, text %q", r.err, r.done, r.text())
	}

	bodies := map[bool]*recorder{}
	for _, split := range []bool{false, true} {
		cfg := fullSpeed(12)
		if split {
			cfg.Faults = "split_utf8"
		}
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		s.Handler().ServeHTTP(rec, chatRequestFor(t, chatBody(true, msgs)))
		bodies[split] = rec
	}
	_, plain := bodies[false].body()
	_, split := bodies[true].body()
	if split != plain {
		t.Fatalf("split stream differs from the plain one:\n%s\n%s", split, plain)
	}
	midRune := 0
	for _, w := range bodies[true].writes {
		if !utf8.Valid(w) {
			midRune++
		}
	}
	if midRune == 0 || len(bodies[true].writes) <= len(bodies[false].writes) {
		t.Fatalf("%d writes (plain: %d), %d ending inside a character", len(bodies[true].writes), len(bodies[false].writes), midRune)
	}
}

func TestFaultRejectPrefill(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(6))
	msgs := conv("[[mock: reject_prefill, times=0]]")
	if r := stream(t, ts, chatBody(true, msgs)); r.status != http.StatusOK || !r.done {
		t.Fatalf("without prefill: status %d", r.status)
	}
	prefill := with(msgs, Message{Role: roleAssistant, Content: Answer(msgs, 6)[0]})
	e := decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, prefill)), http.StatusBadRequest)
	if e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "prefill") {
		t.Fatalf("error = %+v", e)
	}
	// Prompt mode is the way around it.
	prompt := with(prefill, Message{Role: roleUser, Content: "Continue."})
	if r := stream(t, ts, chatBody(true, prompt)); Answer(msgs, 6)[0]+r.text() != AnswerText(msgs, 6) {
		t.Fatalf("prompt mode after a rejected prefill: %q", r.text())
	}
}

func TestFaultOverlap(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(8))
	msgs := conv("[[mock: overlap=3, times=0]]")
	full := AnswerText(msgs, 8)
	if r := stream(t, ts, chatBody(true, msgs)); r.text() != full {
		t.Fatalf("overlap changed a fresh answer: %q", r.text())
	}
	prefix := strings.Join(Answer(msgs, 8)[:3], "")
	r := stream(t, ts, chatBody(true, with(msgs, Message{Role: roleAssistant, Content: prefix})))
	got := r.content()
	if got[0] != lastRunes(prefix, 3) || strings.Join(got[1:], "") != full[len(prefix):] {
		t.Fatalf("chunks %q; want %q repeated, then the rest", got, lastRunes(prefix, 3))
	}
	if r.usage().CompletionTokens != len(got) {
		t.Fatalf("usage %+v, want the overlap counted: %d", r.usage(), len(got))
	}
}

func TestFaultTimes(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(3))
	for _, tc := range []struct {
		directive string
		want      []int
	}{
		{"[[mock: status=503]]", []int{503, 200, 200}},
		{"[[mock: status=503, times=2]]", []int{503, 503, 200, 200}},
		{"[[mock: status=503, times=0]]", []int{503, 503, 503, 503}},
	} {
		for i, want := range tc.want {
			if r := stream(t, ts, chatBody(true, conv(tc.directive))); r.status != want {
				t.Fatalf("%s, request %d: status %d, want %d", tc.directive, i+1, r.status, want)
			}
		}
	}
}

func TestServerFaultsAndOverride(t *testing.T) {
	_, ts := newTestServer(t, Config{Tokens: 3, TokenInterval: -1, Faults: "status=500, times=0"})
	if r := stream(t, ts, chatBody(true, conv("plain"))); r.status != http.StatusInternalServerError {
		t.Fatalf("server-wide fault: status %d, want 500", r.status)
	}
	if r := stream(t, ts, chatBody(true, conv("[[mock:]]"))); r.status != http.StatusOK || !r.done {
		t.Fatalf("empty directive: status %d, want 200", r.status)
	}
	if r := stream(t, ts, chatBody(true, conv("[[mock: eof_after=1]]"))); r.status != http.StatusOK || len(r.content()) != 1 {
		t.Fatalf("own directive: status %d, %d chunks", r.status, len(r.content()))
	}
}

func TestInvalidDirectives(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(3))
	for directive, want := range map[string]string{
		"[[mock: cut_after=x]]":              `"cut_after=x": want a non-negative integer`,
		"[[mock: bogus=1]]":                  `unknown key "bogus"`,
		"[[mock: status=200]]":               `"status=200": want an integer from 400 to 599`,
		"[[mock: stall_before=5]]":           `"stall_before=5": want a non-negative Go duration`,
		"[[mock: no_done=maybe]]":            `"no_done=maybe": want true or false`,
		"[[mock: times=1, times=2]]":         "times is given twice",
		"[[mock: cut_after=1, eof_after=1]":  "unterminated [[mock: directive",
		"[[mock: cut_after=1, eof_after=2]]": "cut_after and eof_after exclude each other",
		"[[mock: stall_after=1]]":            "stall_after and stall_for go together",
		"[[mock: retry_after=1]]":            "need a status",
	} {
		e := decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, conv(directive))), http.StatusBadRequest)
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: message %q does not contain %q", directive, e.Error.Message, want)
		}
	}
}

// Server-wide faults fail chat completions only: GET /v1/models still
// answers, as a provider whose API is up while its completions fail, the
// case a health check by the model list gets wrong.
func TestServerFaultsSpareTheModelList(t *testing.T) {
	_, ts := newTestServer(t, Config{Tokens: 3, TokenInterval: -1, Faults: "status=503, times=0"})
	for range 2 {
		decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, conv("down"))), http.StatusServiceUnavailable)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models: status %d, want 200 while chat fails", resp.StatusCode)
	}
}

func TestFaultsForOneModel(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	msgs := conv("[[mock: status=503, times=0, model=mock-1]]")
	for range 2 {
		decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(false, msgs)), http.StatusServiceUnavailable)
	}
	r := stream(t, ts, chatBody(true, msgs, "model", "mock-2"))
	if r.err != nil || !r.done || r.text() != AnswerText(msgs, 5) {
		t.Fatalf("mock-2: err %v, done %v, text %q; want the whole answer", r.err, r.done, r.text())
	}
}

func TestFaultReset(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	msgs := conv("[[mock: reset]]")
	b, _ := json.Marshal(chatBody(true, msgs))
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a reset answered %d", resp.StatusCode)
	}
	// times defaults to 1: the retry is answered.
	if r := stream(t, ts, chatBody(true, msgs)); r.err != nil || !r.done || r.text() != AnswerText(msgs, 5) {
		t.Fatalf("the retry: err %v, done %v, text %q", r.err, r.done, r.text())
	}
}

func TestNoPrefillModels(t *testing.T) {
	_, ts := newTestServer(t, Config{Tokens: 5, TokenInterval: -1, NoPrefill: []string{"mock-2"}})
	msgs := conv("hello")
	prefilled := with(msgs, Message{Role: roleAssistant, Content: AnswerText(msgs, 2)})
	decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, prefilled, "model", "mock-2")), http.StatusBadRequest)
	if r := stream(t, ts, chatBody(true, prefilled)); r.err != nil || !r.done || AnswerText(msgs, 2)+r.text() != AnswerText(msgs, 5) {
		t.Fatalf("mock-1 continuing a prefill: err %v, text %q", r.err, r.text())
	}
}

func TestSetFaultsWhileServing(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(5))
	put := func(body string) int {
		req, _ := http.NewRequest(http.MethodPut, ts.URL+"/mock/faults", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(`{"faults":"status=503, times=0, model=mock-1"}`); code != http.StatusOK {
		t.Fatalf("PUT /mock/faults: %d", code)
	}
	for range 2 {
		decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(false, conv("down"))), http.StatusServiceUnavailable)
	}
	if r := stream(t, ts, chatBody(true, conv("down"), "model", "mock-2")); r.err != nil || !r.done {
		t.Fatalf("mock-2 while mock-1 is down: %v", r.err)
	}
	if code := put(`{"faults":"nonsense"}`); code != http.StatusBadRequest {
		t.Fatalf("a bad spec: %d", code)
	}
	if err := s.SetFaults(""); err != nil {
		t.Fatal(err)
	}
	if r := stream(t, ts, chatBody(true, conv("down"))); r.err != nil || !r.done {
		t.Fatalf("mock-1 after it came back: %v", r.err)
	}
}
