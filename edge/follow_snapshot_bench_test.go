package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// BenchmarkResumeSnapshot resumes an ended stream of 5,000 chunks from
// its start, in each dialect, with and without snapshot: the time to the
// last event (ns/op: the response ends with it), the events and the bytes
// sent (e2e/BENCHMARKS.md, "Snapshot resume").
//
//	go test -run '^$' -bench ResumeSnapshot ./edge/
func BenchmarkResumeSnapshot(b *testing.B) {
	const chunks = 5000
	srv := relaytest.NATS(b)
	nc, js := relaytest.Connect(b, srv, streams.Topology{MemoryStorage: true})
	id := wire.NewStreamID()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		b.Fatal(err)
	}
	meta, _ := json.Marshal(wire.Meta{Model: testModel, Created: 1700000000})
	if _, err := kv.Create(ctx, id, meta); err != nil {
		b.Fatal(err)
	}
	w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), id, 0, 0)
	frames := []wire.Frame{{Kind: wire.KindClaim, Worker: "bench"}}
	for i := range chunks {
		frames = append(frames, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprintf("w%d ", i), Provider: "alpha", Model: testModel, Attempt: 1})
	}
	frames = append(frames, wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1,
		Usage: &wire.Usage{PromptTokens: 3, CompletionTokens: chunks, TotalTokens: 3 + chunks}})
	for _, f := range frames {
		if _, err := w.Append(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	url := serveBenchEdge(b, srv)

	for _, c := range []struct{ name, path string }{
		{"chat", "/v1/streams/" + id + "?"},
		{"responses", "/v1/responses/" + responses.ResponseID(id) + "?stream=true&"},
		{"messages", "/v1/messages/" + anthropic.MessageID(id) + "?stream=true&"},
	} {
		for _, snap := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/snapshot=%v", c.name, snap), func(b *testing.B) {
				var events, bytes int
				for b.Loop() {
					events, bytes = benchResume(b, url+c.path+fmt.Sprintf("snapshot=%v", snap))
				}
				b.ReportMetric(float64(events), "events/op")
				b.ReportMetric(float64(bytes), "bytes/op")
			})
		}
	}
}

// serveBenchEdge serves an edge on srv until the benchmark ends.
func serveBenchEdge(b *testing.B, srv *server.Server) string {
	b.Helper()
	nc, js := relaytest.Connect(b, srv, streams.Topology{MemoryStorage: true})
	cat, err := provider.NewCatalog([]provider.Config{{Name: "alpha", BaseURL: "http://127.0.0.1:1/v1", Models: []string{testModel}}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{}, Deps{NC: nc, JS: js, Catalog: cat, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// benchResume reads the events of one resume to its end: how many, and
// the bytes of the body.
func benchResume(b *testing.B, url string) (events, bytes int) {
	res, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		bytes += len(sc.Bytes()) + 1
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return events, bytes
}
