package chunklog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// bare connects to a server whose JetStream has none of the relay's
// streams: a chunk subject has no responder unless the test adds one.
func bare(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := natsconn.Connect(natsconn.Config{URL: relaytest.NATS(t).ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// answer replies to every publish on id's chunk subject with the next of
// replies, and sends the expected last sequence each one carried.
func answer(t *testing.T, nc *nats.Conn, id string, replies ...string) <-chan string {
	t.Helper()
	expected := make(chan string, len(replies))
	sub, err := nc.Subscribe(wire.ChunkSubject(id), func(m *nats.Msg) {
		expected <- m.Header.Get(jetstream.ExpectedLastSubjSeqHeader)
		if err := m.Respond([]byte(replies[0])); err != nil {
			t.Error(err)
		}
		replies = replies[1:]
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return expected
}

func TestAppendChainsOnTheLastSequence(t *testing.T) {
	nc, js := bare(t)
	id := wire.NewStreamID()
	expected := answer(t, nc, id,
		`{"stream":"RELAY_CHUNKS","seq":42}`,
		// A field the hand parser does not know: encoding/json reads it.
		`{"stream":"RELAY_CHUNKS","seq":43,"val":"x"}`)
	w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), id, 41, 0)
	for _, want := range []wire.Cursor{{Seq: 1, JSSeq: 42}, {Seq: 2, JSSeq: 43}} {
		c, err := w.Append(context.Background(), wire.Frame{Kind: wire.KindChunk, Content: "x"})
		if err != nil || c != want {
			t.Fatalf("Append = %+v, %v; want %+v", c, err, want)
		}
	}
	if a, b := <-expected, <-expected; a != "41" || b != "42" {
		t.Fatalf("expected last sequences sent: %s, %s; want 41, 42", a, b)
	}
}

// The stream's own answers reach the caller as jetstream's errors, as
// they did through PublishMsg.
func TestAppendMapsStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply string
		want  error
	}{
		{"stream not found", `{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`, jetstream.ErrStreamNotFound},
		// Nothing stored after the writer's last frame (no stream to read):
		// another writer's, so fenced.
		{"wrong last sequence", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 9"},"stream":"RELAY_CHUNKS","seq":0}`, chunklog.ErrFenced},
		{"other error", `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"RELAY_CHUNKS","seq":0}`, &jetstream.APIError{ErrorCode: 10077}},
		{"no stream named", `{"seq":3}`, jetstream.ErrInvalidJSAck},
		{"not json", `nope`, jetstream.ErrInvalidJSAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, js := bare(t)
			id := wire.NewStreamID()
			answer(t, nc, id, tc.reply)
			w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), id, 0, 0)
			_, err := w.Append(context.Background(), wire.Frame{Kind: wire.KindChunk, Content: "x"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append err = %v, want %v", err, tc.want)
			}
			if tc.want != chunklog.ErrFenced && errors.Is(err, chunklog.ErrFenced) {
				t.Fatalf("Append err = %v: fenced", err)
			}
			if w.Seq() != 0 {
				t.Fatalf("Seq = %d after a failed append", w.Seq())
			}
		})
	}
}

// Without the stream nothing answers the publish; after the retries
// PublishMsg makes (a stream between two leaders looks the same), the
// caller gets jetstream.ErrNoStreamResponse, which it retries in turn.
func TestAppendWithoutStreamIsNoStreamResponse(t *testing.T) {
	nc, js := bare(t)
	w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), wire.NewStreamID(), 0, 0)
	start := time.Now()
	_, err := w.Append(context.Background(), wire.Frame{Kind: wire.KindChunk, Content: "x"})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("Append err = %v, want ErrNoStreamResponse", err)
	}
	if d := time.Since(start); d < 2*jetstream.DefaultPubRetryWait {
		t.Fatalf("gave up after %v, before retrying twice", d)
	}
}

func TestAppendEndsWithItsContext(t *testing.T) {
	nc, js := bare(t)
	id := wire.NewStreamID()
	sub, err := nc.SubscribeSync(wire.ChunkSubject(id)) // takes the publish, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), id, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append err = %v, want DeadlineExceeded", err)
	}
}

// A closed connection is final: the worker stops retrying on it.
func TestAppendOnClosedConnection(t *testing.T) {
	nc, js := bare(t)
	w := chunklog.NewWriter(js, chunklog.NewReader(nc, ""), wire.NewStreamID(), 0, 0)
	nc.Close()
	if _, err := w.Append(context.Background(), wire.Frame{Kind: wire.KindChunk, Content: "x"}); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Append err = %v, want ErrConnectionClosed", err)
	}
}

// An attempt whose ack was lost stored the frame: sent again, it is
// refused as out of sequence, recognised as the writer's own, and the
// chain goes on after it.
func TestAppendAfterLostAckContinuesTheChain(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	ctx := context.Background()
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	first := wire.Frame{Kind: wire.KindChunk, Content: "one", Attempt: 1}
	stored, err := chunklog.NewWriter(js, r, id, 0, 0).Append(ctx, first) // the lost attempt
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.Append(ctx, first)
	if err != nil || c != stored {
		t.Fatalf("Append again = %+v, %v; want %+v", c, err, stored)
	}
	next, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "two", Attempt: 1})
	if err != nil || next.Seq != 2 || next.JSSeq <= stored.JSSeq {
		t.Fatalf("next Append = %+v, %v", next, err)
	}
	var got []string
	if _, err := r.Read(ctx, id, 0, func(e chunklog.Entry) error {
		got = append(got, e.Frame.Content)
		return nil
	}); err != nil || len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("stored %q, %v; want [one two]", got, err)
	}
}

// In a region that is not the home, a writer given the region's
// JetStream stores the stream in the region's own chunk log.
func TestAppendInRegionStaysInRegion(t *testing.T) {
	regions := relaytest.TwoRegions(t)
	ncA, _ := relaytest.Connect(t, regions.A, streams.Topology{})
	ncB, g := relaytest.ConnectRegion(t, regions.B, streams.Topology{}, region.Region{Name: "b", HomeDomain: relaytest.DomainA})
	ctx := context.Background()
	id := wire.NewStreamID()
	rB := chunklog.NewReader(ncB, "")
	c, err := chunklog.NewWriter(g, rB, id, 0, 0).Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if last, err := rB.Last(ctx, id); err != nil || last != c.JSSeq {
		t.Fatalf("region b's last = %d, %v; want %d", last, err, c.JSSeq)
	}
	if last, err := chunklog.NewReader(ncA, "").Last(ctx, id); err != nil || last != 0 {
		t.Fatalf("region a's last = %d, %v; want none", last, err)
	}
}
