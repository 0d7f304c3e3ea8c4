package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
)

// The recorders of options.Record: what the fake upstream received and
// what the worker's gate (the breaker's view) was told.

// upstreamCall is one request the fake upstream received.
type upstreamCall struct {
	at    time.Time
	key   string // the bearer token, "" for none
	model string
	// roles are the roles of the request's messages, in order: a
	// continuation ends in "assistant" (prefill) or "assistant", "user"
	// (prompt mode).
	roles []string
}

// callLog is the front of the fake upstream: it logs each chat request
// and passes it on.
type callLog struct {
	mu    sync.Mutex
	calls []upstreamCall
}

func (l *callLog) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Model    string `json:"model"`
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(body, &req)
			c := upstreamCall{at: time.Now(), model: req.Model}
			if auth := r.Header.Get("Authorization"); len(auth) > len("Bearer ") {
				c.key = auth[len("Bearer "):]
			}
			for _, m := range req.Messages {
				c.roles = append(c.roles, m.Role)
			}
			l.mu.Lock()
			l.calls = append(l.calls, c)
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (l *callLog) all() []upstreamCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]upstreamCall(nil), l.calls...)
}

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
