package upstream

import (
	"context"
	"errors"
	"fmt"
	"github.com/relaydev/relay/relay/dialect/chat"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestStreamWireForms(t *testing.T) {
	hello := chunkData("Hello", "")
	world := chunkData(", 世界", "")
	stop := chunkData("!", "stop")
	inWorld := strings.Index(world, "界") + 1 // inside the character's three bytes
	tests := []struct {
		name   string
		pieces []string
	}{
		{name: "LF", pieces: []string{"data: " + hello + "\n\ndata: " + world + "\n\ndata: " + stop + "\n\ndata: [DONE]\n\n"}},
		{name: "CRLF", pieces: []string{"data: " + hello + "\r\n\r\ndata: " + world + "\r\n\r\ndata: " + stop + "\r\n\r\ndata: [DONE]\r\n\r\n"}},
		{name: "CR", pieces: []string{"data: " + hello + "\r\rdata: " + world + "\r\rdata: " + stop + "\r\rdata: [DONE]\r\r"}},
		{
			name: "comments and other fields",
			pieces: []string{
				": OPENROUTER PROCESSING\n\n",
				"id: 1\nevent: message\ndata: " + hello + "\n\n",
				":\n",
				"retry: 1000\ndata: " + world + "\n\n: ping\n\n",
				"data: " + stop + "\n\ndata: [DONE]\n\n",
			},
		},
		{
			name: "multi-line data",
			pieces: []string{
				"data: {\"choices\":[{\"index\":0,\n",
				"data: \"delta\":{\"content\":\"Hello, 世界\"}}]}\n\n",
				"data: " + stop + "\n\ndata: [DONE]\n\n",
			},
		},
		{
			// Flushed writes that split a UTF-8 character, a CRLF and a
			// field name.
			name: "split writes",
			pieces: []string{
				"da", "ta: " + hello + "\r", "\n\r", "\n",
				"data: " + world[:inWorld], world[inWorld : inWorld+1], world[inWorld+1:] + "\n", "\n",
				"data: " + stop + "\r\n\r\n", "data: [DO", "NE]\r", "\n\r\n",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStream(t, NewClient(nil), sseServer(t, tc.pieces...))
			content, err := readAll(s)
			if err != io.EOF {
				t.Fatalf("Next = %v, want io.EOF", err)
			}
			if content != "Hello, 世界!" {
				t.Fatalf("content = %q", content)
			}
			if !s.SawDone() || s.FinishReason() != "stop" {
				t.Fatalf("SawDone = %v, FinishReason = %q", s.SawDone(), s.FinishReason())
			}
			if _, err := s.Next(); err != io.EOF {
				t.Fatalf("Next after the end = %v, want io.EOF again", err)
			}
		})
	}
}

func TestStreamDeltas(t *testing.T) {
	srv := sseServer(t,
		"data: {\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
		"data: {\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
		"data: {\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
		"data: {\"model\":\"m-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n",
		"data: [DONE]\n\n",
	)
	s := openStream(t, NewClient(nil), srv)
	var ds []chat.Delta
	for {
		d, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if len(ds) != 4 || ds[0].Role != "assistant" || string(ds[1].ToolCalls) != `[{"index":0,"function":{"arguments":"{}"}}]` ||
		ds[2].FinishReason != "tool_calls" || ds[3].Usage == nil || ds[3].Usage.TotalTokens != 3 || ds[3].Model != "m-1" {
		t.Fatalf("deltas = %+v", ds)
	}
}

// Stream reads events without copying their data, so the Deltas must hold
// no byte of it: each must still equal its chunk's parse once the reader
// has reused its buffers for the chunks after it. Chunks of the fast path
// and of the general one (two choices) alternate.
func TestStreamDeltasOwnTheirBytes(t *testing.T) {
	var chunks []string
	for i := range 6 {
		c := fmt.Sprintf(`{"model":"m-%d","service_tier":"t%d","choices":[{"index":0,"delta":{"content":"c%d",`+
			`"tool_calls":[{"index":%d}],"x":[%d]},"logprobs":{"content":[%d]},"y":%d}]}`, i, i, i, i, i, i, i)
		if i%2 == 1 {
			c = strings.Replace(c, `"choices":[`, `"choices":[{"index":1,"delta":{}},`, 1)
		}
		chunks = append(chunks, c)
	}
	srv := sseServer(t, "data: "+strings.Join(chunks, "\n\ndata: ")+"\n\ndata: [DONE]\n\n")
	s := openStream(t, NewClient(nil), srv)
	var got []chat.Delta
	for {
		d, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if len(got) != len(chunks) {
		t.Fatalf("%d deltas, want %d", len(got), len(chunks))
	}
	for i, c := range chunks {
		want, err := chat.ParseChunk([]byte(c))
		if err != nil || !reflect.DeepEqual(got[i], want) {
			t.Errorf("delta %d = %+v\nwant %+v (%v)", i, got[i], want, err)
		}
	}
}

func TestStreamEnds(t *testing.T) {
	hello := "data: " + chunkData("Hello", "") + "\n\n"
	stop := "data: " + chunkData("", "stop") + "\n\n"
	tests := []struct {
		name    string
		pieces  []string
		content string
		err     error // io.EOF or a sentinel the error wraps
		done    bool
		finish  string
	}{
		{name: "done", pieces: []string{hello, stop, "data: [DONE]\n\n"}, content: "Hello", err: io.EOF, done: true, finish: "stop"},
		{name: "done without finish", pieces: []string{hello, "data: [DONE]\n\n"}, content: "Hello", err: io.EOF, done: true},
		{name: "missing done after finish", pieces: []string{hello, stop}, content: "Hello", err: io.EOF, finish: "stop"},
		{name: "cut done after finish", pieces: []string{hello, stop, "data: [DO"}, content: "Hello", err: io.EOF, finish: "stop"},
		{name: "garbage after finish", pieces: []string{hello, stop, "data: {oops\n\n"}, content: "Hello", err: io.EOF, finish: "stop"},
		{name: "EOF without finish", pieces: []string{hello}, content: "Hello", err: ErrTruncated},
		{name: "EOF inside an event", pieces: []string{hello, "data: {\"choi"}, content: "Hello", err: ErrTruncated},
		{name: "empty body", err: ErrTruncated},
		{name: "malformed chunk", pieces: []string{hello, "data: {\"choices\":\n\n"}, content: "Hello", err: ErrMalformed},
		{name: "non-JSON data", pieces: []string{hello, "data: hello\n\n"}, content: "Hello", err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStream(t, NewClient(nil), sseServer(t, tc.pieces...))
			content, err := readAll(s)
			if tc.err == io.EOF && err != io.EOF {
				t.Fatalf("Next = %v, want io.EOF", err)
			}
			wantErr(t, err, tc.err)
			if content != tc.content || s.SawDone() != tc.done || s.FinishReason() != tc.finish {
				t.Fatalf("content %q SawDone %v FinishReason %q; want %q %v %q",
					content, s.SawDone(), s.FinishReason(), tc.content, tc.done, tc.finish)
			}
			if _, again := s.Next(); again != err {
				t.Fatalf("Next after the end = %v, want the same %v", again, err)
			}
		})
	}
}

func TestStreamErrorPayload(t *testing.T) {
	srv := sseServer(t,
		"data: "+chunkData("Hel", "")+"\n\n",
		"event: error\ndata: {\"error\":{\"message\":\"Internal server error\",\"type\":\"server_error\",\"code\":502}}\n\n",
	)
	s := openStream(t, NewClient(nil), srv)
	content, err := readAll(s)
	var oe *chat.Error
	if content != "Hel" || !errors.As(err, &oe) || oe.Message != "Internal server error" {
		t.Fatalf("content %q, err %v; want Hel and the provider's error", content, err)
	}
	if Classify(err) != Transient {
		t.Fatalf("Classify(%v) = %v, want transient", err, Classify(err))
	}
}

func TestStreamEventTooLarge(t *testing.T) {
	srv := sseServer(t, "data: "+chunkData("0123456789", "")+"\n\n")
	c := &Client{MaxEventSize: 32}
	_, err := readAll(openStream(t, c, srv))
	wantErr(t, err, ErrEventTooLarge)
	wantErr(t, err, ErrMalformed)
}

func TestStreamCallerCancel(t *testing.T) {
	sent := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+chunkData("a", "stop")+"\n\n")
		_ = http.NewResponseController(w).Flush()
		close(sent)
		waitGone(t, r)
	})
	ctx, cancel := context.WithCancel(t.Context())
	s, err := NewClient(nil).Stream(ctx, Target{BaseURL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, err := s.Next(); err != nil || d.FinishReason != "stop" {
		t.Fatalf("Next = %+v, %v", d, err)
	}
	<-sent
	cancel()
	// Even after a finish_reason, the caller's cancellation is reported
	// as such, never as a clean end.
	_, err = s.Next()
	wantErr(t, err, context.Canceled)
	if Classify(err) != Canceled {
		t.Fatalf("Classify(%v) = %v", err, Classify(err))
	}
}

func TestStreamCallerCancelBeforeHeaders(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { waitGone(t, r) })
	_, err := NewClient(nil).Stream(ctxCanceled(), Target{BaseURL: srv.URL}, nil)
	wantErr(t, err, context.Canceled)
}

func TestStreamCallerDeadlineCause(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { waitGone(t, r) })
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	_, err := NewClient(nil).Stream(ctx, Target{BaseURL: srv.URL}, nil)
	wantErr(t, err, context.Canceled)
	wantErr(t, err, cause)
}

// Close aborts a Next that is blocked on a silent provider.
func TestStreamCloseAbortsNext(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": hi\n\n")
		_ = http.NewResponseController(w).Flush()
		waitGone(t, r)
	})
	s := openStream(t, &Client{StallTimeout: -1}, srv)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next()
		errc <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	err := <-errc
	wantErr(t, err, ErrClosed)
	if Classify(err) != Canceled {
		t.Fatalf("Classify(%v) = %v", err, Classify(err))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
