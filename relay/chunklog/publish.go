package chunklog

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Conn is what a Writer appends through: a jetstream.JetStream, and so a
// region.Regional, which is one.
//
// A JetStream publish is nothing but a core request on the stream's
// subject, answered by the stream with an ack; no API prefix or domain is
// involved. A Writer therefore makes that request itself, on the
// connection the JetStream would have used, instead of calling
// PublishMsg, whose options, header map and reflective decoding of the
// ack about doubled an append's CPU (BenchmarkAppend). With regions this is
// still the route: region.Regional diverts only publishes to shared KV
// keys, and chunk subjects are region-local (region.RegionLocalSubjects),
// stored in the region's own stream through its own connection. Conn
// asks for the JetStream, not a bare connection, so that callers keep
// handing over what their other publishes go through.
type Conn interface {
	Conn() *nats.Conn
}

const (
	// defaultTimeout bounds an append whose ctx has no deadline, as
	// jetstream's default API timeout does for PublishMsg.
	defaultTimeout = 5 * time.Second
	// noResponderRetries and noResponderWait are PublishMsg's defaults
	// (jetstream.DefaultPubRetryAttempts, DefaultPubRetryWait): "no
	// responders" can be a stream between two leaders, not a missing one.
	noResponderRetries = jetstream.DefaultPubRetryAttempts
	noResponderWait    = jetstream.DefaultPubRetryWait
)

// publisher sends one writer's frames, each chained on the stream's last
// message with the expected-last-subject-sequence header, and reads the
// acks. A writer appends one frame at a time, so the message and its
// header are reused. The request is nats.go's (RequestMsgWithContext):
// a reply subscription of this package, shared by all writers, saved
// two allocations of the ~45 an append costs and no measurable CPU, and
// would have had to learn of a closed connection by itself.
type publisher struct {
	nc  *nats.Conn
	msg nats.Msg
}

func newPublisher(nc *nats.Conn, subject string) *publisher {
	return &publisher{nc: nc, msg: nats.Msg{
		Subject: subject,
		Header:  nats.Header{jetstream.ExpectedLastSubjSeqHeader: {""}},
	}}
}

// publish stores data if the subject's last message is at sequence last
// (0: none) and returns its sequence. Its errors are PublishMsg's: the
// server's *jetstream.APIError, jetstream.ErrNoStreamResponse,
// jetstream.ErrInvalidJSAck, ctx's error, or the connection's.
func (p *publisher) publish(ctx context.Context, data []byte, last uint64) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	p.msg.Data = data
	p.msg.Header[jetstream.ExpectedLastSubjSeqHeader][0] = strconv.FormatUint(last, 10)
	reply, err := p.nc.RequestMsgWithContext(ctx, &p.msg)
	for try := 0; errors.Is(err, nats.ErrNoResponders) && try < noResponderRetries; try++ {
		t := time.NewTimer(noResponderWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		reply, err = p.nc.RequestMsgWithContext(ctx, &p.msg)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return 0, jetstream.ErrNoStreamResponse
	case err != nil:
		return 0, err
	}
	ack, err := parseAck(reply.Data)
	if err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	return ack.result()
}
