package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// The stack benchmark's load: 10,000 jobs on four workers, each waiting
// over h2c for a token that comes after the measurement.
const (
	stackStreams = 10_000
	stackWorkers = 4
	stackSamples = 5
	// The fake provider's pause before each token, under the worker's
	// 30 s bound between two tokens, with a keep-alive comment every 5 s,
	// under its 15 s bound on silence (and the provider's own 10 s bound
	// on a write).
	stackPause     = 25 * time.Second
	stackKeepalive = 5 * time.Second
	stackPadBytes  = 5 << 10 // takes the waiting chain past 7.2 KiB, under 15 KiB
)

// BenchmarkWaitingJobStacks measures what the stack rule (stack.go) saves:
// the goroutine stacks of a process whose workers hold 10,000 jobs
// waiting for their provider's next token over HTTP/2, as the worker is,
// and the same jobs with the chain they wait in padded by 5 KiB, which
// grows each job's stack to 16 KiB and keeps it there, as a chain that
// broke the rule would. Each figure is the stacks in use
// (/memory/classes/heap/stacks:bytes, after a collection) with the jobs
// waiting less the same process idle, its workers' slots started, over
// the streams; the process also holds the fake provider's goroutines and
// the embedded nats-server's, the same in both, and the runtime sizes
// the stacks of new goroutines on the average it finds, which the
// padded jobs move too. Each is measured in a
// process of its own (this test binary, run again): what one run leaves
// to the runtime's caches (the stacks of dead goroutines, the start size
// of new ones) would move the next one's figures.
//
//	go test -run '^$' -bench WaitingJobStacks -benchtime 1x ./relay/worker/
func BenchmarkWaitingJobStacks(b *testing.B) {
	if v := os.Getenv(stackVariantEnv); v != "" {
		f := waitingStacks(b, v == "padded")
		fmt.Printf("%s%.0f %.3f\n", stackFiguresPrefix, f.perStream, f.goroutines)
		return
	}
	var rule, padded, goroutines float64
	for range b.N {
		r := stacksInChild(b, "rule")
		p := stacksInChild(b, "padded")
		// The jobs' own stacks are 8 KiB apart; the runtime's start size
		// for new goroutines and its stack spans move the rest.
		if p.perStream-r.perStream < 4<<10 {
			b.Fatalf("stacks per stream: %.0f B as the worker is, %.0f B padded; want the padded jobs' 16 KiB stacks to show", r.perStream, p.perStream)
		}
		rule += r.perStream
		padded += p.perStream
		goroutines += r.goroutines
	}
	n := float64(b.N)
	b.ReportMetric(rule/n, "stack-B/stream")
	b.ReportMetric(padded/n, "stack16K-B/stream")
	b.ReportMetric((padded-rule)/n*stackStreams/(1<<20), "saved-MiB")
	b.ReportMetric(padded/rule, "16K/rule")
	b.ReportMetric(goroutines/n, "goroutines/stream")
}

// stackVariantEnv names the variant a child process measures (rule or
// padded); stackFiguresPrefix starts the line it prints its figures on.
const (
	stackVariantEnv    = "RELAY_STACK_BENCH_VARIANT"
	stackFiguresPrefix = "waiting-stacks: "
)

// stacksInChild measures variant in a process of its own.
func stacksInChild(b *testing.B, variant string) stackFigures {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkWaitingJobStacks$", "-test.benchtime=1x", "-test.count=1")
	cmd.Env = append(os.Environ(), stackVariantEnv+"="+variant)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", variant, err, out)
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, stackFiguresPrefix); ok {
			var f stackFigures
			if _, err := fmt.Sscan(rest, &f.perStream, &f.goroutines); err != nil {
				b.Fatalf("%s: %q: %v", variant, line, err)
			}
			return f
		}
	}
	b.Fatalf("%s: no figures in\n%s", variant, out)
	return stackFigures{}
}

// stackFigures are one run's stacks and goroutines per waiting stream.
type stackFigures struct{ perStream, goroutines float64 }

// waitingStacks runs stackStreams jobs on workers of their own, with an
// embedded nats-server and a fake provider, padding the chain the jobs
// wait in if pad, and returns the median of stackSamples samples.
func waitingStacks(b *testing.B, pad bool) stackFigures {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	var top streams.Topology
	srv := relaytest.NATS(b)
	_, js := relaytest.Connect(b, srv, top)

	mock, err := mockupstream.New(mockupstream.Config{Tokens: 2, TokenInterval: stackPause, CommentInterval: stackKeepalive}, logger)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mockCtx, stopMock := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- mock.Serve(mockCtx, ln) }()
	defer func() {
		stopMock()
		<-served
	}()
	catalog, err := provider.NewCatalog([]provider.Config{{
		Name: "mock", BaseURL: "http://" + ln.Addr().String() + "/v1", APIKeys: []string{"key-1"},
		Models: []string{"mock-1"}, HTTP2PriorKnowledge: true,
	}})
	if err != nil {
		b.Fatal(err)
	}

	runCtx, stopWorkers := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		stopWorkers()
		running.Wait()
	}()
	const slots = stackStreams / stackWorkers
	for i := range stackWorkers {
		wnc, wjs := relaytest.Connect(b, srv, top)
		deps := Deps{NC: wnc, JS: wjs, Catalog: catalog, Logger: logger, Topology: top}
		if pad {
			// New's default client, its transport wrapped.
			deps.Upstream = upstream.NewClient(&http.Client{Transport: paddedTransport{upstream.NewTransport(slots)}})
		}
		w, err := New(Config{ID: fmt.Sprintf("stack-worker-%d", i), MaxInflight: slots, DisablePeerWatch: true}, deps)
		if err != nil {
			b.Fatal(err)
		}
		running.Go(func() {
			if err := w.Run(runCtx); err != nil {
				b.Errorf("Run: %v", err)
			}
		})
	}
	awaitStack(b, ctx, 50*time.Millisecond, func() string { return "the workers' slots" }, func() bool { return runtime.NumGoroutine() > stackStreams })
	idle := sampleStacks()

	for i := range stackStreams {
		id := wire.NewStreamID()
		body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages(fmt.Sprintf("wait %d", i))})
		data, _ := json.Marshal(wire.Request{StreamID: id, Model: "mock-1", Body: body, Created: time.Now().Unix()})
		if _, err := js.PublishAsync(wire.RequestSubject, data, jetstream.WithMsgID(id)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("the requests were not all stored")
	}
	awaitStack(b, ctx, 100*time.Millisecond, func() string { return "every call to reach the provider" }, func() bool {
		return mock.Stats().ChatRequests >= stackStreams
	})
	// Then the dump, which stops the world, once a second.
	waiting := 0
	awaitStack(b, ctx, time.Second, func() string {
		return fmt.Sprintf("every job waiting on its provider (%d of %d)", waiting, stackStreams)
	}, func() bool {
		waiting = jobsWaiting()
		return waiting == stackStreams
	})
	if n := mock.Stats().ByProtocol["HTTP/2.0"]; n < stackStreams {
		b.Fatalf("%d calls over HTTP/2, want at least %d", n, stackStreams)
	}

	var per, gs []float64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for range stackSamples {
		<-tick.C
		s := sampleStacks()
		per = append(per, float64(s.stacks-idle.stacks)/stackStreams)
		gs = append(gs, float64(s.goroutines-idle.goroutines)/stackStreams)
	}
	if n := jobsWaiting(); n != stackStreams {
		b.Fatalf("%d jobs waiting on their provider after the samples, want %d", n, stackStreams)
	}
	return stackFigures{perStream: median(per), goroutines: median(gs)}
}

// stackSample is the process's stacks in use and its goroutines.
type stackSample struct{ stacks, goroutines uint64 }

// sampleStacks collects garbage twice, so that every stack the collector
// would halve is halved, and samples.
func sampleStacks() stackSample {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	return stackSample{stacks: s[0].Value.Uint64(), goroutines: s[1].Value.Uint64()}
}

// awaitStack waits until cond holds, checking it every so often, failing
// if ctx ends first.
func awaitStack(b *testing.B, ctx context.Context, every time.Duration, what func() string, cond func() bool) {
	b.Helper()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.Fatalf("gave up waiting for %s", what())
		}
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// jobsWaiting counts the goroutines of a job waiting for its provider's
// next token (a keep-alive comment is read within NextInto), in a dump of
// every goroutine.
func jobsWaiting() int {
	buf := make([]byte, 256<<20)
	n := 0
	for g := range bytes.SplitSeq(buf[:runtime.Stack(buf, true)], []byte("\n\ngoroutine ")) {
		if bytes.Contains(g, []byte("worker.(*Worker).slot(")) && bytes.Contains(g, []byte("upstream.(*Stream).NextInto(")) {
			n++
		}
	}
	return n
}

// paddedTransport makes its response bodies read under a frame of
// stackPadBytes, as a function of the job's chain that kept a large value
// on the stack would: the chain a job waits in is then over 7.2 KiB.
type paddedTransport struct{ inner http.RoundTripper }

func (t paddedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err == nil {
		resp.Body = paddedBody{resp.Body}
	}
	return resp, err
}

type paddedBody struct{ io.ReadCloser }

func (b paddedBody) Read(p []byte) (int, error) { return paddedRead(b.ReadCloser, p) }

//go:noinline
func paddedRead(r io.Reader, p []byte) (int, error) {
	var pad [stackPadBytes]byte
	n, err := r.Read(p)
	keepPad(pad[:])
	return n, err
}

//go:noinline
func keepPad([]byte) {}
