package e2e

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// Every role connects as its own user of configs/nats/nats-server.conf: a
// streamed answer, cut and resumed, works under those permissions, and so
// does a Durable Stream, which the edge writes in a partition of Durable
// Streams; each role's credentials are refused what the role must not do:
// an edge cannot write a generation's frames (neither a core publish nor a
// JetStream publish is stored) or change the streams, nor read the
// requests other edges offer, a worker cannot queue requests, forge
// metadata or write a Durable Stream's frames, the coordinator cannot read
// offered requests.
func TestNATSPermissionsLeastPrivilege(t *testing.T) {
	const tokens = 30
	// Three partitions: every grant on the chunk streams names each.
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond},
		Tune: func(c *config.Config) { c.Streams.Partitions = 3 }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The edge queues the request and reads the chunks the worker writes.
	msgs, want := prompt("Least privilege, please.", tokens)
	s, err := openSSE(ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
	if err != nil {
		t.Fatal(err)
	}
	id := s.resp.Header.Get("X-Relay-Stream-Id")
	chunks := wire.ChunkStreamOf(id)
	if chunks == wire.ChunkStream {
		t.Fatalf("the edge's first stream %s is in the first partition; the edge takes them in turn from the second", id)
	}
	tr := &transcript{}
	must(t, tr.readUntil(s, 5))
	s.Close()
	if s, err = openSSE(ctx, http.MethodGet, sys.Edge+"/v1/streams/"+id, nil, tr.lastID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	must(t, tr.readUntil(s, 0))
	s.Close()
	if got := tr.text.String(); got != want || tr.status != "done" {
		t.Fatalf("status %q, text differs:\n got %q\nwant %q", tr.status, got, want)
	}
	// A stream no edge started is a 404, after the edge asked the metadata
	// bucket's leader whether a replica only lagged.
	unknown, err := http.Get(sys.Edge + "/v1/streams/" + wire.NewStreamID())
	if err != nil {
		t.Fatal(err)
	}
	unknown.Body.Close()
	if unknown.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown stream: status %d, want 404", unknown.StatusCode)
	}

	// The edge appends the frames of a Durable Stream with its own
	// credentials, in a partition of Durable Streams.
	coordinator := sys.Secured.probe(t, "coordinator")
	ds := dsAppendAndRead(t, sys.Edge+"/ds/least-privilege")
	if wire.ValidGenerationID(ds) || coordinator.storedFrames(wire.ChunkStreamOf(ds), wire.ChunkSubject(ds)) != 3 {
		t.Fatalf("Durable Stream %s: a generation's id %t, frames in %s %d; want a partition of Durable Streams holding its claim and two appends",
			ds, wire.ValidGenerationID(ds), wire.ChunkStreamOf(ds), coordinator.storedFrames(wire.ChunkStreamOf(ds), wire.ChunkSubject(ds)))
	}

	all := []string{wire.RequestStream}
	for k := range 3 {
		all = append(all, wire.ChunkStreamName(k), wire.ChunkStreamName(wire.DurablePartition(k)))
	}
	before := coordinator.lastSeqs(all...)

	t.Run("edge", func(t *testing.T) {
		p := sys.Secured.probe(t, "edge")
		forged := wire.NewStreamIDIn(2)
		p.allowSubscribe("relay.live.>")
		p.allowSubscribe("relay.presence.>")
		p.allowPublish(wire.CancelSubject(forged))
		p.allowPublish("relay.presence." + forged)

		// It reads chunks: the whole stream above, with its credentials.
		// A worker sends the tokens that arrive while a publish is in
		// flight together as its next chunk, so the frames are as many as
		// were stored (fewer than the tokens on a loaded machine): the
		// read must return every stored frame, with every token of the
		// answer and the end.
		reader := chunklog.NewReader(p.nc, "")
		frames, got := 0, chunkText{}
		if _, err := reader.Read(ctx, id, 0, func(e chunklog.Entry) error { frames++; got.add(e.Frame); return nil }); err != nil {
			t.Fatalf("edge cannot read chunks: %v", err)
		}
		if stored := coordinator.storedFrames(chunks, wire.ChunkSubject(id)); frames != stored {
			t.Fatalf("edge read %d frames of the stream, %d are stored", frames, stored)
		}
		if got.tokens != tokens || got.end != wire.StatusDone || got.text.String() != want {
			t.Fatalf("edge read %d tokens ending %q, want %d ending %q:\n got %q\nwant %q", got.tokens, got.end, tokens, wire.StatusDone, got.text.String(), want)
		}
		t.Logf("edge read the %d stored frames: %d tokens", frames, got.tokens)
		leaderReads(t, ctx, p.nc, id)

		// It cannot write a generation's frames, in any partition of
		// generations: not after the stream above (which would fence its
		// worker off), not as a new one.
		frame := wire.Frame{Kind: wire.KindChunk, Seq: 1, Content: "forged"}.Encode()
		p.denyPublish(wire.ChunkSubject(forged))
		p.denyPublish(wire.ChunkSubject(wire.NewStreamID()))
		p.jsPublishFails(wire.ChunkSubject(forged), frame)
		p.jsPublishFails(wire.ChunkSubject(id), frame)
		frames = 0
		if _, err := reader.Read(ctx, forged, 0, func(chunklog.Entry) error { frames++; return nil }); err != nil || frames != 0 {
			t.Fatalf("forged stream has %d frames (err %v), want none", frames, err)
		}
		// A Durable Stream's frames it writes, and reads.
		leaderReads(t, ctx, p.nc, ds)

		// Nor reconfigure or delete the streams, nor write provider health,
		// nor read other edges' requests off the wire.
		p.denyPublish("$JS.API.STREAM.UPDATE." + chunks)
		p.denyPublish("$JS.API.STREAM.DELETE." + chunks)
		p.denyPublish("$JS.API.STREAM.PURGE." + wire.RequestStream)
		p.denyPublish("$JS.API.CONSUMER.MSG.NEXT." + wire.RequestStream + "." + wire.WorkerConsumer)
		p.denyPublish("$KV." + wire.HealthBucket + ".mock")
		p.denySubscribe(wire.RequestSubject)
		p.denySubscribe(wire.OfferSubject)
		p.denySubscribe("relay.chunks.>")
	})

	t.Run("worker", func(t *testing.T) {
		p := sys.Secured.probe(t, "worker")
		p.allowSubscribe("relay.cancel.>")
		p.allowSubscribe(wire.LivenessSubject)
		p.allowSubscribe(wire.AdoptSubject("probe"))
		leaderReads(t, ctx, p.nc, id)

		req := []byte(`{"stream_id":"` + wire.NewStreamID() + `","model":"mock-1","body":{}}`)
		p.denyPublish(wire.RequestSubject)
		p.jsPublishFails(wire.RequestSubject, req)
		// It reads a Durable Stream but cannot append to it.
		leaderReads(t, ctx, p.nc, ds)
		p.denyPublish(wire.ChunkSubject(ds))
		p.jsPublishFails(wire.ChunkSubject(ds), wire.Frame{Kind: wire.KindChunk, Seq: 3, Content: "forged"}.Encode())
		p.denyPublish("$KV." + wire.MetaBucket + "." + id)
		p.denyPublish("$JS.API.STREAM.UPDATE." + wire.RequestStream)
		p.denyPublish("$JS.API.STREAM.DELETE.KV_" + wire.MetaBucket)
		p.denySubscribe("relay.live.>")
		// Nor forge a reply to another connection's request.
		p.denyPublish("_INBOX.forged")
	})

	t.Run("coordinator", func(t *testing.T) {
		p := coordinator
		// Offers carry prompts.
		p.denySubscribe(wire.OfferSubject)
		p.denyPublish(wire.RequestSubject)
		p.denyPublish(wire.ChunkSubject(id))
		p.denyPublish(wire.ChunkSubject(ds))
		p.denyPublish("$JS.API.STREAM.DELETE." + chunks)
		p.denyPublish("_INBOX.forged")
	})

	// Nothing the refused publishes carried was stored.
	if after := coordinator.lastSeqs(all...); !maps.Equal(after, before) {
		t.Fatalf("stream sequences moved from %v to %v: a refused publish was stored", before, after)
	}
	// start (options.Secured) checks at the end that the roles themselves
	// were refused nothing.
}

// leaderReads checks that nc may read the stream's last frame from the
// chunk stream's leader: the edge confirms a missed frame there, the
// worker learns where a refused batch left a stream.
func leaderReads(t *testing.T, ctx context.Context, nc *nats.Conn, id string) {
	t.Helper()
	m, found, err := chunklog.LeaderGet(ctx, nc, "", wire.ChunkStreamOf(id), chunklog.LeaderQuery{LastFor: wire.ChunkSubject(id)})
	if err != nil || !found || m.Subject != wire.ChunkSubject(id) {
		t.Fatalf("leader get of the last frame: %+v, found %v, %v", m, found, err)
	}
}

// chunkText gathers what a read of a stream's frames carried.
type chunkText struct {
	text   strings.Builder
	tokens int
	end    wire.Status
}

func (c *chunkText) add(f wire.Frame) {
	switch f.Kind {
	case wire.KindChunk:
		c.text.WriteString(f.Content)
		c.tokens += f.Tokens
	case wire.KindEnd:
		c.end = f.Status
	}
}

// storedFrames is how many messages stream holds on subject, as the
// server counts them.
func (p *natsProbe) storedFrames(stream, subject string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := p.js.Stream(ctx, stream)
	if err != nil {
		p.t.Fatalf("%s: stream %s: %v", p.user, stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		p.t.Fatalf("%s: stream %s, subject %s: %v", p.user, stream, subject, err)
	}
	return int(info.State.Subjects[subject])
}

// dsAppendAndRead creates a Durable Stream at url, appends to it and reads
// it back; it returns the stream's id.
func dsAppendAndRead(t *testing.T, url string) string {
	t.Helper()
	var id string
	for _, step := range []struct {
		method, body string
		status       int
	}{{http.MethodPut, "durable ", http.StatusCreated}, {http.MethodPost, "stream", http.StatusNoContent}} {
		req, err := http.NewRequest(step.method, url, strings.NewReader(step.body))
		must(t, err)
		req.Header.Set("Content-Type", "text/plain")
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		res.Body.Close()
		if res.StatusCode != step.status {
			t.Fatalf("%s %s: status %d, want %d", step.method, url, res.StatusCode, step.status)
		}
		if step.method == http.MethodPut {
			id = res.Header.Get("X-Relay-Stream-Id")
		}
	}
	res, err := http.Get(url)
	must(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	must(t, err)
	if res.StatusCode != http.StatusOK || string(body) != "durable stream" {
		t.Fatalf("GET %s: %d %q, want 200 %q", url, res.StatusCode, body, "durable stream")
	}
	return id
}
