package mockupstream

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type wireText struct {
	Object  string `json:"object"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
}

func TestCompletionsAnswerLikeChat(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(8))
	resp := post(t, ts, "/v1/completions", "", map[string]any{"model": "mock-1", "prompt": "hello"})
	var out wireText
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	want := AnswerText([]Message{{Role: roleUser, Content: "hello"}}, 8)
	if out.Object != "text_completion" || len(out.Choices) != 1 || out.Choices[0].Text != want || *out.Choices[0].FinishReason != "stop" || out.Usage.CompletionTokens != 8 {
		t.Fatalf("answer %+v, want text %q", out, want)
	}
}

func TestCompletionsStream(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(8))
	resp := post(t, ts, "/v1/completions", "", map[string]any{
		"model": "mock-1", "prompt": "hello", "stream": true, "max_tokens": 5, "stream_options": map[string]any{"include_usage": true},
	})
	sc := bufio.NewScanner(resp.Body)
	var text strings.Builder
	finish, done, usage := "", false, 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
			continue
		case data == "[DONE]":
			done = true
			continue
		}
		var c wireText
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != nil {
				finish += *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
	}
	want := AnswerText([]Message{{Role: roleUser, Content: "hello"}}, 5)
	if text.String() != want || finish != "length" || !done || usage != 5 {
		t.Fatalf("text %q, finish %q, [DONE] %v, usage %d; want %q, length, true, 5", text.String(), finish, done, usage, want)
	}
}

func TestCompletionsHonourFaults(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(8))
	resp := post(t, ts, "/v1/completions", "", map[string]any{"model": "mock-1", "prompt": "[[mock: status=400]] x"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want the injected 400", resp.StatusCode)
	}
	resp = post(t, ts, "/v1/completions", "", map[string]any{"model": "mock-1", "prompt": "[[mock: eof_after=2]] x", "stream": true})
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
			if sc.Text() == "data: [DONE]" {
				t.Fatal("a stream ended early has [DONE]")
			}
		}
	}
	if events != 2 {
		t.Fatalf("%d events before the early end, want 2", events)
	}
}
