package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/runecut"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// maxChunkContent bounds the text of one chunk frame, far below NATS's
// default 1 MiB payload limit, for when text piles up behind a slow publish.
const maxChunkContent = 64 << 10

// publisher appends one attempt's deltas to the stream as chunk frames,
// with one publish in flight: the deltas that arrive while a chunk is being
// stored are concatenated into the next one. A stream then costs a publish
// round trip per chunk rather than per token and keeps up with any token
// rate (one stream took ~13.8k chunks/s on R1, ~5.1k/s on R3), and a slow
// NATS never slows the reading of the upstream.
//
// add and close are called by the goroutine reading the upstream; run by
// another, the only one using the writer until run returns.
type publisher struct {
	writer *streamWriter
	// template is copied into every chunk: Provider, Model and Attempt.
	template wire.Frame
	// seam marks the attempt's first chunk when it does not start the
	// stream.
	seam wire.Seam

	mu      sync.Mutex
	content []byte            // text not yet published
	tokens  int               // deltas with text in content
	tools   []json.RawMessage // tool-call fragments not yet published
	model   string            // the upstream's model, from the latest delta
	closed  bool              // no more deltas will come
	wake    chan struct{}     // capacity 1: data or close is waiting
	firstAt time.Time         // when the first text or tool call came (observe.go)

	// callStart is when the upstream call started (set before run).
	callStart time.Time

	// chunks counts appended chunks; read it after run returned.
	chunks int
}

func newPublisher(w *streamWriter, template wire.Frame, seam wire.Seam) *publisher {
	template.Kind = wire.KindChunk
	return &publisher{writer: w, template: template, seam: seam, model: template.Model, wake: make(chan struct{}, 1)}
}

// add queues a delta's text and tool calls. It never waits for NATS.
// Tool-call fragments are kept as they came, in order: several in one chunk
// are merged by index by the client, as within any provider's stream.
func (p *publisher) add(d upstream.Delta) error {
	var tools []json.RawMessage
	if len(d.ToolCalls) > 0 {
		if err := json.Unmarshal(d.ToolCalls, &tools); err != nil {
			return fmt.Errorf("worker: %w: tool_calls is not an array: %v", upstream.ErrMalformed, err)
		}
	}
	p.mu.Lock()
	p.content = append(p.content, d.Content...)
	if d.Content != "" {
		p.tokens++
	}
	p.tools = append(p.tools, tools...)
	if p.firstAt.IsZero() && (d.Content != "" || len(tools) > 0) {
		p.firstAt = time.Now()
	}
	if d.Model != "" {
		p.model = d.Model
	}
	p.mu.Unlock()
	if d.Content != "" || len(tools) > 0 {
		p.signal()
	}
	return nil
}

// close says no more deltas will come; run publishes what is queued and
// returns.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
}

func (p *publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run appends chunks until close was called and everything queued is
// stored, or an append fails: with chunklog.ErrFenced when another writer
// owns the stream, or because the chunk log stayed unavailable beyond the
// retry bound. After a failure, queued and later deltas are dropped.
func (p *publisher) run(ctx context.Context) error {
	for {
		f, ok, closed := p.take()
		if !ok {
			if closed {
				return nil
			}
			select {
			case <-p.wake:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if p.writer.Seq() == 0 {
			f.Role = "assistant"
			f.UpstreamTTFTMS = p.upstreamTTFTMS()
		}
		if p.chunks == 0 {
			f.Seam = p.seam
		}
		if err := p.writer.append(ctx, f); err != nil {
			return err
		}
		p.chunks++
	}
}

// take removes the next chunk's worth of queued data. ok is false when
// nothing is queued; closed reports that nothing more will be.
func (p *publisher) take() (f wire.Frame, ok, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.content) == 0 && len(p.tools) == 0 {
		return f, false, p.closed
	}
	f = p.template
	f.Model = p.model
	n := runecut.Len(p.content, maxChunkContent) // a chunk of valid text is valid text
	f.Content = string(p.content[:n])
	f.Tokens, p.tokens = p.tokens, 0 // a chunk cut at maxChunkContent counts them all
	p.content = p.content[:copy(p.content, p.content[n:])]
	if len(p.content) == 0 && len(p.tools) > 0 {
		// Tool calls ride with the last piece of the text before them.
		f.ToolCalls = mustJSON(p.tools)
		p.tools = nil
	}
	return f, true, p.closed
}
