package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
)

// What the in-process harness puts around the fake upstream: a front per
// provider that logs what it received and injects outages, and with
// options.Record the gate that records what the worker's breaker would
// have been told.

// upstreamCall is one request a provider's front received.
type upstreamCall struct {
	at    time.Time
	path  string
	key   string // the bearer token, "" for none
	model string
	conv  string // the first user message: one per client request
	// roles are the roles of the request's messages, in order: a
	// continuation ends in "assistant" (prefill) or "assistant", "user"
	// (prompt mode).
	roles []string
	// probe marks the coordinator's chat probe (health, idle breakers),
	// which is not client traffic: chats leaves it out.
	probe bool
	// ended is when the fake upstream's answer returned: the whole
	// answer sent, or the worker closed the call.
	ended time.Time
}

// front is a provider's front: it logs requests, and fails them while
// down (503 for new ones, the connection cut for streams under way) or
// when fail says so.
type front struct {
	url  string // provider base URL
	down atomic.Bool
	// fail, if set, answers a chat request with the status it returns
	// (0: pass it on), given the request's index from 0.
	fail atomic.Pointer[func(n int, c upstreamCall) (status int, retryAfter string)]

	mu    sync.Mutex
	calls []upstreamCall
}

func (f *front) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := upstreamCall{at: time.Now(), path: r.URL.Path}
		if auth := r.Header.Get("Authorization"); len(auth) > len("Bearer ") {
			c.key = auth[len("Bearer "):]
		}
		if r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Model     string `json:"model"`
				Messages  []mockupstream.Message
				MaxTokens int `json:"max_tokens"`
			}
			_ = json.Unmarshal(body, &req)
			c.model = req.Model
			c.probe = req.MaxTokens == 1 && len(req.Messages) == 1 && req.Messages[0].Content == provider.ProbeMessage
			for _, m := range req.Messages {
				if m.Role == "user" && c.conv == "" {
					c.conv = m.Content
				}
				c.roles = append(c.roles, m.Role)
			}
		}
		f.mu.Lock()
		n := len(f.calls)
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		if f.down.Load() {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		if fail := f.fail.Load(); fail != nil && c.path == "/v1/chat/completions" {
			if status, ra := (*fail)(n, c); status != 0 {
				if ra != "" {
					w.Header().Set("Retry-After", ra)
				}
				http.Error(w, `{"error":{"message":"injected","type":"server_error"}}`, status)
				return
			}
		}
		next.ServeHTTP(&cutWriter{ResponseWriter: w, down: &f.down}, r)
		f.mu.Lock()
		f.calls[n].ended = time.Now()
		f.mu.Unlock()
	})
}

// cutWriter drops the connection of a stream under way once its front
// goes down.
type cutWriter struct {
	http.ResponseWriter
	down *atomic.Bool
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.down.Load() {
		panic(http.ErrAbortHandler)
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// chats returns the chat requests received in [from, to), the
// coordinator's probes left out.
func (f *front) chats(from, to time.Time) []upstreamCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []upstreamCall
	for _, c := range f.calls {
		if c.path == "/v1/chat/completions" && !c.probe && !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

func (f *front) allChats() []upstreamCall { return f.chats(time.Time{}, time.Now().Add(time.Hour)) }

// gateLog is the worker's Gate: it admits every call, runs beforeAdmit
// first if set, and keeps every report, which is what a circuit breaker
// would count.
type gateLog struct {
	mu          sync.Mutex
	admits      int
	reports     []fleet.Report
	beforeAdmit func(n int, provider string)
}

func (g *gateLog) Admit(_ context.Context, provider, _ string) (fleet.Ticket, error) {
	g.mu.Lock()
	g.admits++
	n, hook := g.admits, g.beforeAdmit
	g.mu.Unlock()
	if hook != nil {
		hook(n, provider)
	}
	return gateTicket{g}, nil
}

type gateTicket struct{ g *gateLog }

func (t gateTicket) Done(r fleet.Report) {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	t.g.reports = append(t.g.reports, r)
}

// verdicts returns "provider/model:verdict" per report, in order.
func (g *gateLog) verdicts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, r := range g.reports {
		out = append(out, r.Provider+"/"+r.Model+":"+r.Verdict.String())
	}
	return out
}

// report returns the i-th report.
func (g *gateLog) report(i int) fleet.Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reports[i]
}

// failures counts the reports a breaker would count against provider.
func (g *gateLog) failures(provider string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.reports {
		if r.Provider == provider && r.Verdict == breaker.Failure {
			n++
		}
	}
	return n
}

func (g *gateLog) setBeforeAdmit(f func(n int, provider string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.beforeAdmit = f
}
