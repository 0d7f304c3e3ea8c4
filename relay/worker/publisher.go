package worker

import (
	"context"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/runecut"
	"github.com/relaydev/relay/relay/runners"
	"github.com/relaydev/relay/relay/wire"
)

// maxChunkContent bounds the text of one chunk frame, far below NATS's
// default 1 MiB payload limit, for when text piles up behind a slow publish.
const maxChunkContent = 64 << 10

// publisher appends one attempt's deltas to the stream as chunk frames,
// with one publish in flight: the deltas that arrive while a chunk is being
// stored are merged into the next one. A stream then costs a publish
// round trip per chunk rather than per token and keeps up with any token
// rate (one stream took ~13.8k chunks/s on R1, ~5.1k/s on R3), and a slow
// NATS never slows the reading of the upstream.
//
// Merging keeps everything a provider said (segment.accepts): text and
// reasoning are concatenated, tool-call fragments, annotations and
// logprobs entries appended in order, unknown members kept; deltas that
// cannot be merged faithfully go to separate chunks. A publisher serves
// one attempt, so a chunk never mixes two attempts' logprobs or
// fingerprints: across a seam, each chunk says what its own call said.
//
// add and close are called by the goroutine reading the upstream. The
// appends run on the worker's runners (relay/runners), one drain at a time:
// start schedules the first, and add or close the next once one ended
// with nothing left to publish. A drain is the only user of the writer
// until done received the publisher's result.
type publisher struct {
	writer *streamWriter
	// provider and attempt go into every chunk, with model.
	provider string
	attempt  int
	// seam marks the attempt's first chunk when it does not start the
	// stream.
	seam wire.Seam

	// ctx serves the appends; claim is waited for before the first;
	// onFail is called if an append fails; pool runs the drains. All are
	// set by start.
	ctx    context.Context
	claim  *firstClaim
	onFail func()
	pool   *runners.Pool
	// done receives the result of the publishing, once: nil when close
	// was called and everything queued is stored, or the first failure.
	done chan error

	mu sync.Mutex
	// draining is set while a drain is scheduled or running, and stays
	// set after a failure: nothing is published after it.
	draining bool
	// queue holds what is not yet published, oldest first; deltas are
	// merged into the last segment.
	queue []*segment
	// sent holds the unknown members of the chunks published, by level
	// and name, with their latest value (see news).
	sent    map[string]string
	model   string    // the upstream's model, from the latest delta
	closed  bool      // no more deltas will come
	firstAt time.Time // when the first text, reasoning or tool call came (observe.go)

	// callStart is when the upstream call started (set before run).
	callStart time.Time

	// chunks counts appended chunks; read it after done received.
	chunks int
	// claimed is set once the claim was waited for (drains only).
	claimed bool
}

// newPublisher returns the publisher of an attempt whose chunks say the
// Provider, Model and Attempt of template (its only members read: a frame
// kept whole would be half a publisher's memory).
func newPublisher(w *streamWriter, template wire.Frame, seam wire.Seam) *publisher {
	return &publisher{writer: w, provider: template.Provider, attempt: template.Attempt, seam: seam, model: template.Model, done: make(chan error, 1)}
}

// start starts publishing on pool, under ctx, once claim is stored (a nil
// claim is stored); onFail is called if publishing fails. Nothing is
// published before the claim is stored, and a failed claim fails the
// publishing with its error.
func (p *publisher) start(ctx context.Context, claim *firstClaim, pool *runners.Pool, onFail func()) {
	p.ctx, p.claim, p.onFail, p.pool = ctx, claim, onFail, pool
	p.mu.Lock()
	p.draining = true
	p.mu.Unlock()
	pool.Run(p.drain)
}

// add queues what a delta says. It never waits for NATS. Tool-call
// fragments are kept as they came, in order: several in one chunk are
// merged by index by the client, as within any provider's stream.
func (p *publisher) add(d *chat.Delta) error {
	tools, err := splitArray("tool_calls", d.ToolCalls)
	if err != nil {
		return err
	}
	annotations, err := splitArray("annotations", d.Annotations)
	if err != nil {
		return err
	}
	citations, err := splitArray("citations", d.Citations)
	if err != nil {
		return err
	}
	p.mu.Lock()
	seg, opened := p.last(d)
	seg.add(d, tools, annotations, citations)
	data := seg.hasData()
	if p.firstAt.IsZero() && (d.Content != "" || d.Reasoning != "" || d.Refusal != "" || d.RedactedReasoning != "" || len(tools) > 0) {
		p.firstAt = time.Now()
	}
	if d.Model != "" {
		p.model = d.Model
	}
	wake := (data || opened) && p.wakeLocked()
	p.mu.Unlock()
	if wake {
		p.pool.Run(p.drain)
	}
	return nil
}

// wakeLocked reports whether a drain is to be scheduled for what was just
// queued (none is, and publishing started), and marks it scheduled.
func (p *publisher) wakeLocked() bool {
	if p.pool == nil || p.draining {
		return false
	}
	p.draining = true
	return true
}

// markLogprobsGap records that the logprobs of a delta were dropped
// (wire.Frame.LogprobsGap); the next chunk says so.
func (p *publisher) markLogprobsGap() {
	p.mu.Lock()
	seg, _ := p.last(&chat.Delta{})
	seg.logprobsGap = true
	p.mu.Unlock()
}

// last returns the segment d is to be merged into, opened if the last one
// does not accept it.
func (p *publisher) last(d *chat.Delta) (seg *segment, opened bool) {
	if n := len(p.queue); n > 0 && p.queue[n-1].accepts(d) {
		return p.queue[n-1], false
	}
	seg = &segment{}
	p.queue = append(p.queue, seg)
	return seg, len(p.queue) > 1
}

// close says no more deltas will come; done then receives the result
// once what is queued is published.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	wake := p.wakeLocked()
	p.mu.Unlock()
	if wake {
		p.pool.Run(p.drain)
	}
}

// drain appends chunks until nothing is queued, and says the result on
// done once close was called and everything queued is stored, or at the
// first failure: chunklog.ErrFenced when another writer owns the stream,
// or because the chunk log stayed unavailable beyond the retry bound.
// After a failure, queued and later deltas are dropped.
func (p *publisher) drain() {
	if !p.claimed {
		if err := p.claim.wait(); err != nil {
			p.fail(err)
			return
		}
		p.claimed = true
	}
	for {
		p.mu.Lock()
		f, ok, closed := p.takeLocked()
		if !ok {
			p.draining = false
		}
		p.mu.Unlock()
		if !ok {
			if closed {
				p.done <- nil
			}
			return
		}
		if p.writer.Seq() == 0 {
			f.Role = "assistant"
			f.UpstreamTTFTMS = p.upstreamTTFTMS()
		}
		if p.chunks == 0 {
			f.Seam = p.seam
		}
		if err := p.writer.append(p.ctx, f); err != nil {
			p.fail(err)
			return
		}
		p.chunks++
	}
}

// fail ends the publishing with err; no drain is scheduled after it.
func (p *publisher) fail(err error) {
	p.onFail()
	p.done <- err
}

// take removes the next chunk's worth of queued data. ok is false when
// nothing is ready; closed reports that nothing more will be. A segment
// without data is published once it is followed by another or the
// attempt ended, and only if it has news; else (the fingerprint or the
// service_tier every chunk of a provider repeats) it is dropped.
func (p *publisher) take() (f wire.Frame, ok, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked()
}

// takeLocked is take, with p.mu held.
func (p *publisher) takeLocked() (f wire.Frame, ok, closed bool) {
	for len(p.queue) > 0 {
		seg, final := p.queue[0], len(p.queue) == 1
		switch {
		case seg.hasData(), (!final || p.closed) && p.news(seg):
			return p.cut(seg), true, p.closed
		case final && !p.closed:
			return f, false, false
		}
		p.queue = p.queue[1:]
	}
	return f, false, p.closed
}

// cut makes a frame of the front of seg, the first segment: its reasoning
// then its text, at most maxChunkContent bytes of them, and with the last
// piece everything else. seg leaves the queue once it is all taken.
func (p *publisher) cut(seg *segment) wire.Frame {
	f := wire.Frame{Kind: wire.KindChunk, Provider: p.provider, Model: p.model, Attempt: p.attempt}
	f.SystemFingerprint = seg.fingerprint
	f.Tokens, seg.tokens = seg.tokens, 0 // a chunk cut at maxChunkContent counts them all
	f.NewBlock, seg.newBlock = seg.newBlock, false
	n := runecut.Len(seg.reasoning, maxChunkContent)
	f.Reasoning = string(seg.reasoning[:n])
	seg.reasoning = seg.reasoning[:copy(seg.reasoning, seg.reasoning[n:])]
	if len(seg.reasoning) == 0 {
		n = runecut.Len(seg.content, maxChunkContent-len(f.Reasoning))
		f.Content = string(seg.content[:n])
		seg.content = seg.content[:copy(seg.content, seg.content[n:])]
	}
	if len(seg.reasoning) == 0 && len(seg.content) == 0 {
		// Tool calls, logprobs and the rest ride with the last piece of
		// the text before them.
		seg.rest(&f)
		p.queue = p.queue[1:]
		if p.sent == nil {
			p.sent = map[string]string{}
		}
		for _, l := range seg.extras() {
			for _, m := range l.fields {
				p.sent[l.level+m.Name] = string(m.Value)
			}
		}
	}
	return f
}

// news reports whether seg says something no published chunk said: a
// logprobs gap, or an unknown member with a new value.
func (p *publisher) news(seg *segment) bool {
	if seg.logprobsGap {
		return true
	}
	for _, l := range seg.extras() {
		for _, m := range l.fields {
			if p.sent[l.level+m.Name] != string(m.Value) {
				return true
			}
		}
	}
	return false
}
