package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// A worker process's jobs, waiting for their provider's next token over
// HTTP/2, use under a quarter of an 8 KiB stack less the runtime's 800
// bytes of guard: the collector then keeps their stacks at 8 KiB, the
// largest item of a worker's memory per generation (relay/worker/stack.go).
// The worker is sent SIGQUIT with GOTRACEBACK=system, which prints every
// goroutine's frames with their fp and sp; a waiting job's stack in use is
// its outermost fp less its innermost sp.
func TestProcessAJobWaitsOnAnEightKiBStack(t *testing.T) {
	const (
		streams = 3
		guard   = 800          // runtime's stackNosplit, counted as in use
		quarter = 16 << 10 / 4 // a 16 KiB stack is halved under this
		topSlop = 64           // between the outermost fp and the stack's top
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := procs.New(ctx, procs.Options{Dir: t.TempDir(), Binaries: processBinaries(t), Logf: t.Logf, StopTimeout: 5 * time.Second})
	must(t, err)
	defer h.Close()
	n, err := h.StartNATS(ctx, procs.NATSOptions{})
	must(t, err)
	mock, err := h.Start(ctx, procs.Role{Role: procs.MockUpstream, Settings: procs.Settings{"mock_upstream.token_interval": "500ms", "mock_upstream.tokens": 40}})
	must(t, err)
	provider := mock.Provider("mock", "mock-1")
	provider.HTTP2PriorKnowledge = true
	providers := []procs.Provider{provider}
	worker, err := h.Start(ctx, procs.Role{Role: procs.Worker, NATS: n.URLs(), Providers: providers, Env: []string{"GOTRACEBACK=system"}})
	must(t, err)
	edge, err := h.Start(ctx, procs.Role{Role: procs.Edge, NATS: n.URLs(), Providers: providers})
	must(t, err)

	for i := range streams {
		msgs, want := prompt("A job waits on its stack "+strconv.Itoa(i), 40)
		c, err := postStream(ctx, edge.URL, msgs, want, nil)
		must(t, err)
		defer c.close()
		must(t, c.readN(2))
	}
	must(t, worker.Signal(syscall.SIGQUIT))
	select {
	case <-worker.Exited(): // with status 2, after the dump
	case <-ctx.Done():
		t.Fatal("the worker did not exit on SIGQUIT")
	}
	dump, err := worker.Log()
	must(t, err)

	frame := regexp.MustCompile(` fp=0x([0-9a-f]+) sp=0x([0-9a-f]+) `)
	waiting := 0
	for _, g := range strings.Split(dump, "\n\ngoroutine ")[1:] {
		if !strings.Contains(g, "worker.(*Worker).slot") || !strings.Contains(g, "http2pipe).Read") {
			continue
		}
		waiting++
		var top, bottom uint64
		for _, m := range frame.FindAllStringSubmatch(g, -1) {
			fp, _ := strconv.ParseUint(m[1], 16, 64)
			sp, _ := strconv.ParseUint(m[2], 16, 64)
			top = max(top, fp)
			if bottom == 0 || sp < bottom {
				bottom = sp
			}
		}
		if used := top - bottom + topSlop + guard; used >= quarter {
			t.Errorf("a waiting job uses %d bytes of its stack (frames %d, plus %d of slop and %d of guard), want under %d so that its stack stays at 8 KiB:\ngoroutine %s",
				used, top-bottom, topSlop, guard, quarter, g)
		}
	}
	if waiting != streams {
		t.Fatalf("found %d jobs waiting on their provider in the worker's goroutine dump, want %d:\n%s", waiting, streams, dump[:min(len(dump), 4000)])
	}
}
