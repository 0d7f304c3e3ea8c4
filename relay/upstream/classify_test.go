package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/relaydev/relay/relay/dialect/chat"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// hijack takes over the connection of a request so a test can write raw
// bytes and break it.
func hijack(t *testing.T, w http.ResponseWriter) (*net.TCPConn, *bufio.ReadWriter) {
	t.Helper()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return nil, nil
	}
	return conn.(*net.TCPConn), rw
}

// reset closes conn with a TCP RST instead of a FIN.
func reset(conn *net.TCPConn) {
	_ = conn.SetLinger(0)
	_ = conn.Close()
}

func TestClassifyConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = NewClient(nil).Stream(t.Context(), Target{BaseURL: "http://" + addr}, nil)
	wantErr(t, err, syscall.ECONNREFUSED)
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v, want transient", err, c)
	}
}

func TestClassifyResetBeforeHeaders(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if conn, _ := hijack(t, w); conn != nil {
			reset(conn)
		}
	})
	_, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: srv.URL}, nil)
	wantErr(t, err, syscall.ECONNRESET)
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v, want transient", err, c)
	}
}

func TestClassifyResetMidStream(t *testing.T) {
	read := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, rw := hijack(t, w)
		if conn == nil {
			return
		}
		event := "data: " + chunkData("a", "") + "\n\n"
		fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(event), event)
		_ = rw.Flush()
		select {
		case <-read:
		case <-t.Context().Done():
		}
		reset(conn)
	})
	s := openStream(t, NewClient(nil), srv)
	if d, err := s.Next(); err != nil || d.Content != "a" {
		t.Fatalf("Next = %+v, %v", d, err)
	}
	close(read)
	_, err := s.Next()
	wantErr(t, err, ErrTruncated)
	wantErr(t, err, syscall.ECONNRESET)
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v, want transient", err, c)
	}
}

func TestClassifyUnexpectedEOF(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, rw := hijack(t, w)
		if conn == nil {
			return
		}
		fmt.Fprint(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000\r\n\r\n: only this\n\n")
		_ = rw.Flush()
		_ = conn.Close()
	})
	_, err := readAll(openStream(t, NewClient(nil), srv))
	wantErr(t, err, ErrTruncated)
	wantErr(t, err, io.ErrUnexpectedEOF)
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v, want transient", err, c)
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		want   Class
	}{
		{500, Transient}, {502, Transient}, {503, Transient}, {504, Transient}, {529, Transient},
		{429, Transient}, {408, Transient},
		{400, RequestFault}, {404, RequestFault}, {409, RequestFault}, {413, RequestFault}, {422, RequestFault},
		{401, Credential}, {403, Credential},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) })
			_, err := NewClient(nil).Stream(t.Context(), Target{BaseURL: srv.URL}, nil)
			if c := Classify(err); c != tc.want {
				t.Fatalf("Classify(%v) = %v, want %v", err, c, tc.want)
			}
		})
	}
}

func TestClassifyTimeouts(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { waitGone(t, r) })

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err := NewClient(nil).Stream(ctx, Target{BaseURL: srv.URL}, nil)
	wantErr(t, err, context.DeadlineExceeded)
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v: a deadline is a timeout", err, c)
	}

	_, err = NewClient(&http.Client{Timeout: 10 * time.Millisecond}).Stream(t.Context(), Target{BaseURL: srv.URL}, nil)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Stream = %v, want a timeout", err)
	}
	if c := Classify(err); c != Transient {
		t.Fatalf("Classify(%v) = %v", err, c)
	}
}

func TestClassifyCanceled(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { waitGone(t, r) })
	_, err := NewClient(nil).Stream(ctxCanceled(), Target{BaseURL: srv.URL}, nil)
	if c := Classify(err); c != Canceled {
		t.Fatalf("Classify(%v) = %v, want canceled", err, c)
	}
}

func TestClassifyErrors(t *testing.T) {
	tests := []struct {
		err  error
		want Class
	}{
		{&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}}}, Transient},
		{fmt.Errorf("upstream: p: %w", ErrTruncated), Transient},
		{fmt.Errorf("upstream: p: %w: no bytes for 1s", ErrStalled), Transient},
		{fmt.Errorf("upstream: p: %w", ErrEventTooLarge), Transient},
		{fmt.Errorf("upstream: p: %w: x", ErrMalformed), Transient},
		{io.ErrUnexpectedEOF, Transient},
		{errors.New("anything else"), Transient},
		{fmt.Errorf("upstream: p: %w", ErrClosed), Canceled},
		{fmt.Errorf("upstream: p: %w", context.Canceled), Canceled},
		{fmt.Errorf("upstream: p: %w", context.DeadlineExceeded), Transient},
		{&StatusError{Status: 418}, RequestFault},
		{&StatusError{Status: 302}, Transient},
	}
	for _, tc := range tests {
		if c := Classify(tc.err); c != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, c, tc.want)
		}
	}
}

// Errors sent inside a 2xx stream have no status; their type and code say
// what went wrong.
func TestClassifyPayload(t *testing.T) {
	tests := []struct {
		e    chat.Error
		want Class
	}{
		{chat.Error{Type: "server_error"}, Transient},
		{chat.Error{Type: "overloaded_error", Code: "529"}, Transient},
		{chat.Error{Type: "requests", Code: "rate_limit_exceeded"}, Transient},
		{chat.Error{Type: "invalid_request_error", Code: "context_length_exceeded"}, RequestFault},
		{chat.Error{Type: "BadRequestError", Code: "400"}, RequestFault},
		{chat.Error{Type: "invalid_request_error", Code: "invalid_api_key"}, Credential},
		{chat.Error{Type: "authentication_error"}, Credential},
		{chat.Error{Type: "permission_error"}, Credential},
		{chat.Error{Code: "401"}, Credential},
		{chat.Error{}, Transient},
	}
	for _, tc := range tests {
		err := fmt.Errorf("upstream: p: error in stream: %w", &tc.e)
		if c := Classify(err); c != tc.want {
			t.Errorf("Classify(%+v) = %v, want %v", tc.e, c, tc.want)
		}
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{
		Transient: "transient", RequestFault: "request_fault", Credential: "credential", Canceled: "canceled", Class(9): "class(9)",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}
