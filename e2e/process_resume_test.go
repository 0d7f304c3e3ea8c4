package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// Cross-edge resumes in a replicated cluster: the issue asks for 10,000,
// which took about 30 s (some 360 resumes/s) on a 2-core machine busy with
// another test suite. Before the fix, the first false 410 came within a
// few thousand.
const (
	processResumes       = 10000
	processResumeClients = 8
	processResumeTokens  = 100
)

// TestProcessResumeOtherEdgeNeverLies: on a 3-node R3 cluster, a client of
// one edge resumes on the other edge right after each event it receives,
// and right after the stream's response began (no cursor yet), while the
// stream goes on. A direct get may reach a replica that does not hold the
// frame or the Meta yet; no resume may answer 410 cursor_expired or 404
// stream_not_found for what the relay has acknowledged.
func TestProcessResumeOtherEdgeNeverLies(t *testing.T) {
	s := start(t, options{Processes: true,
		ClusterNodes: 3, Mock: mockupstream.Config{Tokens: processResumeTokens, TokenInterval: 5 * time.Millisecond},
		// streams.replicas unset: three on a cluster, as shipped.
		Edges: 2, Workers: 3, Coordinator: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()

	var resumes, lies atomic.Int64
	began := time.Now()
	round := 0
	for resumes.Load() < processResumes {
		var wg sync.WaitGroup
		errs := make([]error, processResumeClients)
		for i := range processResumeClients {
			wg.Go(func() {
				from, to := s.Edges[(round+i)%2], s.Edges[(round+i+1)%2]
				errs[i] = resumeEachEvent(ctx, from, to, fmt.Sprintf("round %d stream %d", round, i), &resumes, &lies)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			break
		}
		round++
	}
	took := time.Since(began)
	t.Logf("%d resumes on the other edge (%d rounds of %d streams of %d tokens) in %v, %.0f/s; %d false 410/404",
		resumes.Load(), round, processResumeClients, processResumeTokens, took.Round(time.Millisecond),
		float64(resumes.Load())/took.Seconds(), lies.Load())
	if lies.Load() > 0 {
		t.Fatalf("%d resumes answered 410 or 404 for an acknowledged stream", lies.Load())
	}
}

// resumeEachEvent streams one answer from edge from, and resumes it on edge
// to once before the first event and once after each event, closing each
// resume as soon as it was accepted.
func resumeEachEvent(ctx context.Context, from, to, name string, resumes, lies *atomic.Int64) error {
	msgs, want := prompt("Resume me everywhere: "+name+".", processResumeTokens)
	c, err := postStream(ctx, from, msgs, want, nil)
	if err != nil {
		return fmt.Errorf("%s: post: %w", name, err)
	}
	defer c.close()
	resume := func(cursor string) error {
		resumes.Add(1)
		r, err := openSSE(ctx, http.MethodGet, to+"/v1/streams/"+c.id, nil, cursor)
		var he *httpError
		switch {
		case errors.As(err, &he) && (he.Status == http.StatusGone || he.Status == http.StatusNotFound):
			lies.Add(1)
			return fmt.Errorf("resume at %q on the other edge: %w", cursor, err)
		case err != nil:
			return fmt.Errorf("resume at %q on the other edge: %w", cursor, err)
		}
		r.Close()
		return nil
	}
	if err := resume(""); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	tr := &transcript{}
	if err := tr.follow(c.cur, 0, func(ev sseEvent) error {
		if ev.Data == "[DONE]" {
			return nil
		}
		return resume(ev.ID)
	}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if got := tr.text.String(); got != want {
		return fmt.Errorf("%s: text differs:\n got %q\nwant %q", name, got, want)
	}
	return nil
}
