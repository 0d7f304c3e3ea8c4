package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// piece is one chunk as a client saw it, with the relay extension that
// says who produced it.
type piece struct {
	Content  string
	Provider string
	Model    string
	Attempt  int
	Seam     wire.Seam
}

// answer is everything a client received for one streamed request.
type answer struct {
	text     string
	pieces   []piece
	status   string
	finish   string
	usage    *wire.Usage
	attempts int
	cost     float64
	errType  string
	errMsg   string
	// firstText is when the first non-empty content arrived, counted from
	// the request.
	firstText time.Duration
}

// seams returns the pieces that start an attempt after the first, as
// "seam:provider/model#attempt".
func (a *answer) seams() []string {
	var out []string
	for _, p := range a.pieces {
		if p.Seam != "" {
			out = append(out, fmt.Sprintf("%s:%s/%s#%d", p.Seam, p.Provider, p.Model, p.Attempt))
		}
	}
	return out
}

// textOf returns the text of the pieces of attempts in [from, to].
func (a *answer) textOf(from, to int) string {
	var b strings.Builder
	for _, p := range a.pieces {
		if p.Attempt >= from && p.Attempt <= to {
			b.WriteString(p.Content)
		}
	}
	return b.String()
}

// ask posts a one-message streaming chat request for model to the edge and
// reads the whole answer, checking cursors as it goes.
func ask(t *testing.T, edge, model, content string) *answer {
	t.Helper()
	a, err := read(edge, model, content)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// read is ask for goroutines other than the test's.
func read(edge, model, content string) (*answer, error) {
	return readRequest(edge, map[string]any{
		"model": model, "stream": true,
		"messages": []mockupstream.Message{{Role: "user", Content: content}},
	})
}

// readRequest is read with the request body given.
func readRequest(edge string, req map[string]any) (*answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	return readWith(ctx, edge, req, nil)
}

// readWith is readRequest with ctx as its only deadline; texted, if not
// nil, is called once, when the client has received text.
func readWith(ctx context.Context, edge string, req map[string]any, texted func()) (*answer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	s, err := openSSE(ctx, http.MethodPost, edge+"/v1/chat/completions", body, "")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	tr := &transcript{}
	a := &answer{}
	err = tr.follow(s, 0, func(ev sseEvent) error {
		if ev.Data == "[DONE]" {
			return nil
		}
		had := a.text != ""
		if err := a.add(ev.Data, time.Since(started)); err != nil {
			return err
		}
		if texted != nil && !had && a.text != "" {
			texted()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.text != tr.text.String() {
		return nil, fmt.Errorf("answer text %q differs from the transcript's %q", a.text, tr.text.String())
	}
	return a, nil
}

// add records one event's data.
func (a *answer) add(data string, at time.Duration) error {
	var ev chunkJSON
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return fmt.Errorf("event %s: %w", data, err)
	}
	r := ev.Relay
	switch {
	case ev.Error != nil:
		a.status, a.errType, a.errMsg, a.attempts, a.cost = r.Status, ev.Error.Type, ev.Error.Message, r.Attempts, r.Cost
	case len(ev.Choices) > 0 && ev.Choices[0].FinishReason != nil:
		a.status, a.finish, a.usage, a.attempts, a.cost = r.Status, *ev.Choices[0].FinishReason, ev.Usage, r.Attempts, r.Cost
	case len(ev.Choices) > 0:
		c := ev.Choices[0].Delta.Content
		if !utf8.ValidString(c) {
			return fmt.Errorf("chunk content %q is not valid UTF-8", c)
		}
		if c != "" && a.text == "" {
			a.firstText = at
		}
		a.text += c
		a.pieces = append(a.pieces, piece{Content: c, Provider: r.Provider, Model: r.Model, Attempt: r.Attempt, Seam: r.Seam})
	}
	return nil
}

// expectDone checks that the answer is exactly want and ended done.
func (a *answer) expectDone(t *testing.T, want string, attempts int) {
	t.Helper()
	if a.text != want {
		t.Fatalf("text differs:\n got %q\nwant %q", a.text, want)
	}
	if a.status != "done" || a.finish != "stop" || a.errType != "" {
		t.Fatalf("status %q, finish %q, error %q %q; want done/stop", a.status, a.finish, a.errType, a.errMsg)
	}
	if a.attempts != attempts {
		t.Fatalf("%d attempts, want %d (seams %v)", a.attempts, attempts, a.seams())
	}
	if a.usage == nil || a.usage.CompletionTokens == 0 || a.usage.TotalTokens != a.usage.PromptTokens+a.usage.CompletionTokens {
		t.Fatalf("usage = %+v, want the providers' usage summed", a.usage)
	}
}

// tokensText is the first n tokens of the answer to content.
func tokensText(content string, tokens, n int) string {
	return strings.Join(mockupstream.Answer([]mockupstream.Message{{Role: "user", Content: content}}, tokens)[:n], "")
}

// answerText is the full answer to content.
func answerText(content string, tokens int) string {
	return mockupstream.AnswerText([]mockupstream.Message{{Role: "user", Content: content}}, tokens)
}

// expectSeams checks the seams of an answer.
func expectSeams(t *testing.T, a *answer, want ...string) {
	t.Helper()
	got := a.seams()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("seams %v, want %v", got, want)
	}
}

// expectVerdicts checks the gate's reports.
func expectVerdicts(t *testing.T, g *gateLog, want ...string) {
	t.Helper()
	got := g.verdicts()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
}
