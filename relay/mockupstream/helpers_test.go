package mockupstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// newTestServer runs a mock built from cfg behind a real HTTP server for
// the duration of the test. Tests that do not care about pacing pass
// TokenInterval -1.
func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// fullSpeed is the config most tests use: short answers, no pacing.
func fullSpeed(tokens int) Config {
	return Config{Tokens: tokens, TokenInterval: -1}
}

// conv builds a conversation of a system prompt and one user message.
func conv(user string) []Message {
	return []Message{{Role: roleSystem, Content: "You are a mock."}, {Role: roleUser, Content: user}}
}

// with returns messages followed by more, without touching messages.
func with(messages []Message, more ...Message) []Message {
	return append(append([]Message(nil), messages...), more...)
}

// chatBody builds a chat completions request body; extra adds fields.
func chatBody(stream bool, messages []Message, extra ...any) map[string]any {
	body := map[string]any{"model": "mock-1", "messages": messages, "stream": stream}
	if stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return body
}

// post sends body to path on ts, with key as bearer token if not empty.
func post(t *testing.T, ts *httptest.Server, path, key string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wireChunk is a chat.completion.chunk as a client decodes it, defined apart
// from the server's types so that the tests check the wire shape.
type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      *string `json:"role"`
			Content   *string `json:"content"`
			Reasoning *string `json:"reasoning_content"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Usage             *wireUsage `json:"usage"`
}

type wireUsage struct {
	PromptTokens            int             `json:"prompt_tokens"`
	CompletionTokens        int             `json:"completion_tokens"`
	TotalTokens             int             `json:"total_tokens"`
	PromptTokensDetails     json.RawMessage `json:"prompt_tokens_details"`
	CompletionTokensDetails json.RawMessage `json:"completion_tokens_details"`
}

// streamResult is a streamed response as a client saw it.
type streamResult struct {
	status    int
	header    http.Header
	chunks    []wireChunk
	malformed []string // data payloads that are not JSON
	done      bool     // "data: [DONE]" arrived
	comments  int
	err       error // what ended the body; nil for a clean end
}

// content returns the content deltas, in order.
func (r streamResult) content() []string {
	var out []string
	for _, c := range r.chunks {
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && ch.Delta.Role == nil {
				out = append(out, *ch.Delta.Content)
			}
		}
	}
	return out
}

func (r streamResult) text() string { return strings.Join(r.content(), "") }

// finish returns the finish reason, or "" if none arrived.
func (r streamResult) finish() string {
	for _, c := range r.chunks {
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				return *ch.FinishReason
			}
		}
	}
	return ""
}

// usage returns the usage chunk's usage, or nil.
func (r streamResult) usage() *wireUsage {
	for _, c := range r.chunks {
		if c.Usage != nil {
			return c.Usage
		}
	}
	return nil
}

// stream posts a streaming request and reads the whole response.
func stream(t *testing.T, ts *httptest.Server, body map[string]any) streamResult {
	t.Helper()
	resp := post(t, ts, "/v1/chat/completions", "", body)
	r := streamResult{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		return r
	}
	r.err = readSSE(t, resp.Body, &r)
	return r
}

// readSSE parses server-sent events into r and returns the error that ended
// the body, if it was not a clean end. It fails the test on anything a
// client could not parse other than a malformed JSON payload.
func readSSE(t *testing.T, body io.Reader, r *streamResult) error {
	t.Helper()
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
		case strings.HasPrefix(line, ":"):
			r.comments++
		case r.done:
			t.Fatalf("event after [DONE]: %q", line)
		case line == "data: [DONE]":
			r.done = true
		case strings.HasPrefix(line, "data: "):
			var c wireChunk
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
				r.malformed = append(r.malformed, line)
				continue
			}
			r.chunks = append(r.chunks, c)
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

// wireError is an OpenAI error body.
type wireError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// decodeError reads an error response, failing the test if it does not have
// the wanted status or OpenAI's shape.
func decodeError(t *testing.T, resp *http.Response, status int) wireError {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d", resp.StatusCode, status)
	}
	var e wireError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("error body lacks message or type: %+v", e)
	}
	return e
}

// recorder is a ResponseWriter that keeps every write apart, locked so that
// a test can look at it while the handler runs in another goroutine.
type recorder struct {
	mu     sync.Mutex
	header http.Header
	status int
	writes [][]byte
}

func newRecorder() *recorder { return &recorder{header: make(http.Header)} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, bytes.Clone(b))
	return len(b), nil
}

func (r *recorder) Flush() {}

// body returns the status and everything written so far.
func (r *recorder) body() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, string(bytes.Join(r.writes, nil))
}

// serveRecorded runs a request through h in a new goroutine; the returned
// channel is closed when the handler returns.
func serveRecorded(t *testing.T, h http.Handler, req *http.Request) (*recorder, <-chan struct{}) {
	t.Helper()
	rec := newRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	return rec, done
}

// chatRequestFor builds a POST /v1/chat/completions for a recorder test.
func chatRequestFor(t *testing.T, body map[string]any) *http.Request {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
}
