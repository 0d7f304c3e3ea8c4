package edge

import (
	"net/http"
	"sync"
)

// # Requests served on runners
//
// Over HTTP/1.1 a streamed answer takes its connection over (serve_sse_conn.go),
// so each request comes on a new connection, and net/http serves each
// connection on a new goroutine, which starts on the smallest stack. The
// request's work is deep: the middleware, encoding/json's recursive
// decoding of the body, the trace context, rendering the first events.
// Under load (100 clients, a 20-token answer each) the copying of that
// goroutine's stack as it grew, several times a request, was about a
// twentieth of the edge's processor time. So the handler runs on one of
// the edge's runners (relay/runners), whose stacks grew once, while net/http's
// goroutine waits for it: a hand-over costs two goroutine switches, far
// less than the copies.
//
// A WebSocket is served by its handler until it closes; it stays on
// net/http's goroutine, as a runner waiting on it would hold a second
// goroutine for the socket's life. A streamed answer that could not take
// its connection over (HTTP/2) or an answer sent whole holds its runner
// to the end, and net/http's goroutine (with its small stack) waits.
//
// A panic in the handler is recovered on the runner and raised again on
// net/http's goroutine, which deals with it as before (http.ErrAbortHandler
// aborts the response quietly; any other is logged and the connection
// closed), and the runner goes on.

// onRunners serves each request but a WebSocket upgrade with next on one
// of s's runners.
func (s *Server) onRunners(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		h := handOvers.Get().(*handOver)
		h.next, h.w, h.r = next, w, r
		s.runners.Run(h.serve)
		<-h.done
		p, panicked := h.panic, h.panicked
		*h = handOver{done: h.done, serve: h.serve}
		handOvers.Put(h)
		if panicked {
			panic(p)
		}
	})
}

// handOver is one request handed to a runner. They are pooled, with their
// channel and their serve method value, so that a hand-over allocates
// nothing.
type handOver struct {
	next http.Handler
	w    http.ResponseWriter
	r    *http.Request
	// done is signalled when next returned or panicked.
	done  chan struct{}
	serve func()
	// panic is what next panicked with, if it did.
	panic    any
	panicked bool
}

var handOvers = sync.Pool{New: func() any {
	h := &handOver{done: make(chan struct{}, 1)}
	h.serve = h.run
	return h
}}

// run serves the request on the runner.
func (h *handOver) run() {
	defer func() {
		// Since Go 1.21 even panic(nil) recovers as a value.
		if p := recover(); p != nil {
			h.panic, h.panicked = p, true
		}
		h.done <- struct{}{}
	}()
	h.next.ServeHTTP(h.w, h.r)
}
