package chunklog

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/relaydev/relay/relay/wire"
)

// On a replicated stream every message the leader receives alone is a raft
// round of its own, and most of what the servers spend on a stored frame
// is that round. A Committer stores the appends of every writer on one
// connection together: while one batch is out, what the writers append
// waits, and goes as the next batch once the first is acknowledged; and
// when appends come often, an append waits up to Linger for others to
// join it. A lone stream waits for nothing, and a busy worker shares a
// round among all its streams. The batch is a
// JetStream atomic batch: one proposal, all or nothing, each message
// fenced on its stream's last frame as a single append is, and the
// messages stored in order, so one ack gives every frame its sequence.
//
// An atomic batch is stored by one stream, so a Committer keeps a lane per
// partition (wire.Partition): each lane has its own queue and its own
// batch in flight, and the leaders of the partitions take theirs at once.
//
// One server stages an atomic batch in a file of its own, synced, so there
// a batch costs more than the appends it groups: a worker groups its
// appends only on a replicated stream (Batches).

// Batch limits: a batch holds at most maxBatchMsgs frames and
// maxBatchBytes of them (the server's limit is 1,000 messages by default);
// what does not fit goes in the next.
const (
	maxBatchMsgs  = 256
	maxBatchBytes = 1 << 20
)

// refusedTries bounds how often one append is sent again in a batch that
// another stream's append got refused, before the refusal is its own.
const refusedTries = 8

// Batches reports whether appends to the stream configured as cfg are to
// be grouped: it is replicated and takes atomic batches.
func Batches(cfg jetstream.StreamConfig) bool {
	return cfg.Replicas > 1 && cfg.AllowAtomicPublish
}

// Committer groups the appends of its writers into atomic batches, one
// batch in flight at a time in each partition. Make one per connection
// with NewCommitter and writers with its NewWriter method. Its zero value
// is not usable.
type Committer struct {
	lanes [wire.AllPartitions]lane
}

// lane groups the appends to one partition's chunk stream.
type lane struct {
	nc *nats.Conn
	// run runs the loop that sends the batches that queued while one was
	// out; it returns at once.
	run func(func())
	// sent is told the size of every batch sent.
	sent func(frames int)
	// id prefixes the batch ids: unique to this lane, short because the
	// server stores it with every message.
	id string

	mu sync.Mutex
	// queue holds the appends not yet sent, oldest first.
	queue []*pending
	// busy is set while a batch is being sent or its loop is scheduled.
	busy bool
	// batches numbers the batches sent, for their ids.
	batches uint64
	// gap is the mean time between appends lately (an exponentially
	// weighted average, of gaps up to 2×Linger), and lastAt when the last
	// one came.
	gap    time.Duration
	lastAt time.Time
	// aloneUntil is when batches may be tried again after the server
	// refused one as a batch (batchRefused): until then appends go alone,
	// rather than each be refused first.
	aloneUntil time.Time
}

// NewCommitter returns a committer that sends its batches on nc. run
// starts the loop that sends batches queued behind another (nil: a new
// goroutine); a batch that finds none out is sent by the appending
// goroutine itself. sent, if not nil, is told the size of every batch.
func NewCommitter(nc *nats.Conn, run func(func()), sent func(frames int)) *Committer {
	if run == nil {
		run = func(f func()) { go f() }
	}
	if sent == nil {
		sent = func(int) {}
	}
	c := &Committer{}
	id := nuid.Next()[:10]
	for k := range c.lanes {
		c.lanes[k] = lane{nc: nc, run: run, sent: sent, id: id + strconv.Itoa(k), gap: 2 * Linger}
	}
	return c
}

// NewWriter returns a writer whose appends c groups, but for a stream's
// claims and first chunk, which go alone: a client waits for them, and a
// single append does not wait behind a batch (see chunklog.NewWriter).
func (c *Committer) NewWriter(js Conn, reader *Reader, streamID string, last, seq uint64) *Writer {
	w := NewWriter(js, reader, streamID, last, seq)
	w.commit = c
	return w
}

// pending is one append waiting in a committer. A writer has one, reused:
// it appends one frame at a time.
type pending struct {
	// at is when the append was queued.
	at time.Time
	// pub sends the append when it is a batch of its own.
	pub       *publisher
	subject   string
	partition int
	data      []byte
	last      uint64 // the fence: the subject's last sequence
	// done receives the outcome once the append was sent and answered.
	done chan outcome
	// refusals counts the batches refused, for another stream's reason,
	// that this append was sent in and sent again after.
	refusals int
}

// outcome is where an append was stored, or why it was not.
type outcome struct {
	seq uint64
	err error
}

// errAlone means the batch could not be made (a server that refuses
// atomic batches, or has too many in flight): the append is to be sent on
// its own.
var errAlone = errors.New("chunklog: append alone")

// refused is the error of an append whose batch was refused for a fence:
// its own, or another stream's in the same batch. Nothing of the batch was
// stored; the writer finds out which by reading its stream's last
// sequence.
type refused struct{ err error }

func (r refused) Error() string { return "chunklog: batch refused: " + r.err.Error() }
func (r refused) Unwrap() error { return r.err }

// append stores p's data after p.last and says where in p.done, or waits
// for that if ctx ends once the batch is out.
func (c *Committer) append(ctx context.Context, p *pending) outcome {
	return c.lanes[p.partition].append(ctx, p)
}

func (c *lane) append(ctx context.Context, p *pending) outcome {
	p.at = time.Now()
	c.mu.Lock()
	if !c.lastAt.IsZero() {
		// A pause counts as no more than two lingers, so that the mean
		// comes back within a few appends once they come often again.
		c.gap += (min(p.at.Sub(c.lastAt), 2*Linger) - c.gap) / 8
	}
	c.lastAt = p.at
	c.queue = append(c.queue, p)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if lead {
		c.waitForOthers()
		c.sendQueued()
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.busy = false
		} else {
			// The rest goes on without this writer, which has its answer.
			c.run(c.loop)
		}
		c.mu.Unlock()
		return <-p.done
	}
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
	}
	c.mu.Lock()
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.mu.Unlock()
			return outcome{err: ctx.Err()}
		}
	}
	c.mu.Unlock()
	// Sent already: its answer comes within the batch's own timeout.
	return <-p.done
}

// loop sends batches until nothing is queued.
func (c *lane) loop() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.waitForOthers()
		c.sendQueued()
	}
}

// Linger is how long an append waits at most for others to join its
// batch, when appends come at least twice as often. Without it batches
// hardly form (a batch's round trip is shorter than the gap between two
// streams' appends); 10 ms keeps most of what 20 ms saves the servers,
// and a reader does not see it (e2e/BENCHMARKS.md, "Choices the figures
// decided"). A claim and a stream's first chunk never wait: they go
// alone.
const Linger = 10 * time.Millisecond

// waitForOthers waits until the oldest queued append has waited
// Linger, when appends come at least twice as often: otherwise no other
// would likely join it, and the wait would be a loss.
func (c *lane) waitForOthers() {
	c.mu.Lock()
	if len(c.queue) == 0 || c.gap*2 > Linger || len(c.queue) >= maxBatchMsgs || time.Now().Before(c.aloneUntil) {
		c.mu.Unlock()
		return
	}
	wait := time.Until(c.queue[0].at.Add(Linger))
	c.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
}

// sendQueued sends one batch of what is queued and settles its appends.
func (c *lane) sendQueued() {
	c.mu.Lock()
	batch := c.take()
	c.batches++
	id := c.id + strconv.FormatUint(c.batches, 36)
	alone := time.Now().Before(c.aloneUntil)
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if alone && len(batch) > 1 {
		c.settle(batch, 0, errAlone)
		return
	}
	seq, err := c.send(id, batch)
	c.sent(len(batch))
	c.settle(batch, seq, err)
}

// take removes the next batch from the queue: at most maxBatchMsgs and
// maxBatchBytes, and one append per subject (the server fences a subject
// once in a batch), the rest left queued in order. c.mu is held.
func (c *lane) take() []*pending {
	var batch, left []*pending
	size := 0
	for i, p := range c.queue {
		if len(batch) == maxBatchMsgs || len(batch) > 0 && size+len(p.data) > maxBatchBytes {
			left = append(left, c.queue[i:]...)
			break
		}
		if hasSubject(batch, p.subject) {
			left = append(left, p)
			continue
		}
		batch = append(batch, p)
		size += len(p.data)
	}
	c.queue = append(c.queue[:0], left...)
	return batch
}

// hasSubject reports whether an append of batch is on subject. Two writers
// on one subject in one worker are rare (a stream handed back to the
// worker that held it), so a scan beats a set.
func hasSubject(batch []*pending, subject string) bool {
	for _, p := range batch {
		if p.subject == subject {
			return true
		}
	}
	return false
}

// aloneFor is how long appends go alone after the server refused a
// batch as one (too many in flight, atomic publishing off).
const aloneFor = time.Second

// batchTimeout bounds a batch from its first message to its ack.
const batchTimeout = 5 * time.Second

// send publishes batch as one atomic batch (or, alone, as a single
// append) and returns the sequence of its last message.
func (c *lane) send(id string, batch []*pending) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(batch) == 1 {
		p := batch[0]
		return p.pub.publish(ctx, p.data, p.last)
	}
	for i, p := range batch[:len(batch)-1] {
		// No reply: the server answers a message before the commit only
		// to say it staged it, and the commit's answer says it all.
		if err := c.nc.PublishMsg(batchMsg(p, id, i+1, false)); err != nil {
			return 0, err
		}
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, batchMsg(batch[len(batch)-1], id, len(batch), true))
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			err = jetstream.ErrNoStreamResponse
		}
		return 0, err
	}
	ack, err := parseAck(reply.Data)
	if err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	seq, err := ack.result()
	if err == nil && (ack.Count != len(batch) || ack.Batch != id) {
		return 0, jetstream.ErrInvalidJSAck
	}
	return seq, err
}

// batchMsg is the n-th message of batch id carrying p, the commit if
// commit is set.
func batchMsg(p *pending, id string, n int, commit bool) *nats.Msg {
	h := nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(p.last, 10)},
		headerBatchID:                       {id},
		headerBatchSeq:                      {strconv.Itoa(n)},
	}
	if commit {
		h[headerBatchCommit] = []string{"1"}
	}
	return &nats.Msg{Subject: p.subject, Header: h, Data: p.data}
}

// The atomic batch headers.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// settle answers every append of batch: stored at its place below last,
// sent again with the next batch, or failed.
func (c *lane) settle(batch []*pending, last uint64, err error) {
	n := uint64(len(batch))
	switch {
	case err == nil:
		for i, p := range batch {
			p.done <- outcome{seq: last - (n - 1 - uint64(i))}
		}
		return
	case len(batch) > 1 && inProcess(err):
		// A subject of the batch had a message proposed and not yet
		// applied: the previous batch's last, just acknowledged (the
		// server clears its mark a moment after the ack), or a
		// takeover's. Nothing was stored; the batch goes again after a
		// pause that grows with each refusal (a round is about a
		// millisecond), ahead of what queued behind it, and an append
		// refused too often has its own say.
		var again []*pending
		most := 0
		for _, p := range batch {
			if p.refusals++; p.refusals <= refusedTries {
				again = append(again, p)
				most = max(most, p.refusals)
				continue
			}
			p.done <- outcome{err: refused{err}}
		}
		time.Sleep(time.Duration(most) * time.Millisecond)
		c.mu.Lock()
		c.queue = append(again, c.queue...)
		c.mu.Unlock()
		return
	case len(batch) > 1 && isWrongLastSequence(err):
		err = refused{err}
	case len(batch) > 1 && batchRefused(err):
		c.mu.Lock()
		c.aloneUntil = time.Now().Add(aloneFor)
		c.mu.Unlock()
		err = errAlone
	}
	for _, p := range batch {
		p.done <- outcome{err: err}
	}
}

// inProcess reports the refusal of a fenced message whose subject has a
// message in process (10164, "wrong last sequence" without a number).
func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeInProcess
}

const errCodeInProcess = 10164

// batchRefused reports an error of the atomic batch itself, not of its
// messages: atomic publishing off, too many batches in flight, a batch
// incomplete or too large. Its appends go alone.
func batchRefused(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case 10174, 10175, 10176, 10177, 10179, 10199, 10200, 10210:
		return true
	}
	return false
}
