package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// A model whose cache is on (provider.Cache) keeps each answer that ended
// done, per tenant, in wire.AnswerBucket (wire "Cached answers"). A
// request that no provider could take, with nothing published yet, is
// answered from there if an identical one (answerKey) was kept; in prefer
// mode a deterministic request is answered from there before any call.
// Either way every chunk and the end frame are marked Cached: a client is
// never handed a kept answer as a fresh one.

// answerTimeout bounds one read or write of the cache: it is never worth
// holding a stream's end for long.
const answerTimeout = 2 * time.Second

// maxAnswerBytes bounds a kept answer, well within NATS's default
// max_payload (1 MiB); a longer answer is not kept.
const maxAnswerBytes = 512 << 10

// answerCache is the worker's handle on wire.AnswerBucket, looked up at
// its first use: a worker whose models keep no answers never needs it.
type answerCache struct {
	b *streams.Bucket
}

func (c *answerCache) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.b.KV(ctx)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return kv, nil
}

// get returns the answer kept under key, and false if there is none.
func (c *answerCache) get(ctx context.Context, key string) (wire.CachedAnswer, bool, error) {
	var a wire.CachedAnswer
	kv, err := c.bucket(ctx)
	if err != nil {
		return a, false, err
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return a, false, nil
	case err != nil:
		return a, false, fmt.Errorf("worker: read a kept answer: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return a, false, fmt.Errorf("worker: read a kept answer: %w", err)
	}
	return a, true, nil
}

// put keeps a under key for ttl. An answer already kept under key stays
// until its own TTL ends: the first answer that completed is the one
// served.
func (c *answerCache) put(ctx context.Context, key string, a wire.CachedAnswer, ttl time.Duration) error {
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("worker: keep an answer: %w", err)
	}
	if len(data) > maxAnswerBytes {
		return fmt.Errorf("worker: keep an answer: %d bytes, more than %d", len(data), maxAnswerBytes)
	}
	kv, err := c.bucket(ctx)
	if err != nil {
		return err
	}
	_, err = kv.Create(ctx, key, data, jetstream.KeyTTL(ttl))
	switch {
	case err == nil, errors.Is(err, jetstream.ErrKeyExists):
		return nil
	case streams.IsStorageFull(err):
		return fmt.Errorf("worker: keep an answer: bucket %s is full (streams.storage_mib.answers): %w", wire.AnswerBucket, err)
	}
	return fmt.Errorf("worker: keep an answer: %w", err)
}

// cache returns the cache of the request's model if it is on for the
// request's tenant.
func (j *job) cache() (provider.Cache, bool) {
	m, ok := j.w.catalog.ModelSettings(j.req.Model)
	if !ok || !m.Cache.For(j.req.Tenant) {
		return provider.Cache{}, false
	}
	return m.Cache, true
}

// keptFirst is the outcome of a request answered from the cache, which its
// model's cache prefers (prefersKept) and holds an answer for; nil if not.
func (j *job) keptFirst() *outcome {
	if !j.prefersKept() {
		return nil
	}
	out, ok := j.replayKept()
	if !ok {
		return nil
	}
	return &out
}

// prefersKept reports whether the request is answered from the cache
// rather than by a provider if an answer is kept: its model's cache
// prefers kept answers for its tenant, and the request is deterministic.
func (j *job) prefersKept() bool {
	c, ok := j.cache()
	return ok && c.Mode == provider.CachePrefer && deterministic(j.req.Body)
}

// replayKept answers from the cache, and reports whether an answer was
// kept.
func (j *job) replayKept() (outcome, bool) {
	a, ok := j.keptAnswer()
	if !ok {
		return outcome{}, false
	}
	j.log.Info("answering a deterministic request from the cache")
	return j.replay(a), true
}

// orKept answers from the cache a request the attempt loop gave up on
// because no provider could take it, if an identical one was kept: only
// when nothing was published (a kept answer continues nothing), and never
// a request the provider refused as the client's fault, nor one cancelled
// or handed over. Otherwise out stands.
func (j *job) orKept(out outcome) outcome {
	switch {
	case out.err == nil, out.logErr != nil, j.callCtx.Err() != nil, j.writer.Seq() > 0,
		out.class == upstream.RequestFault, out.class == upstream.Canceled:
		return out
	}
	if _, ok := j.cache(); !ok {
		return out
	}
	a, ok := j.keptAnswer()
	if !ok {
		return out
	}
	j.log.Info("no provider could answer; answering from the cache", "err", out.err)
	return j.replay(a)
}

// keptAnswer reads the answer kept for the request, if any, once: a
// request that looked for one before calling (hasKept) finds the same
// answer when it falls back on it.
func (j *job) keptAnswer() (wire.CachedAnswer, bool) {
	if j.kept != nil {
		return j.kept.a, j.kept.ok
	}
	j.kept = &keptLookup{}
	key, err := answerKey(j.req.Tenant, j.req.Model, j.req.Body)
	if err != nil {
		j.log.Warn("answer cache not read", "err", err)
		return wire.CachedAnswer{}, false
	}
	ctx, cancel := context.WithTimeout(j.logCtx, answerTimeout)
	defer cancel()
	a, ok, err := j.w.answers.get(ctx, key)
	if err != nil {
		j.log.Warn("answer cache not read", "err", err)
	}
	j.kept.a, j.kept.ok = a, ok
	return a, ok
}

// keptLookup is what keptAnswer found.
type keptLookup struct {
	a  wire.CachedAnswer
	ok bool
}

// hasKept reports whether the request can fall back on a kept answer: its
// model's cache is on for its tenant, nothing is published yet, and an
// answer is kept. A gate then counts it as an alternative to waiting for a
// provider that is down (fleet.CallInfo.Alternatives), so the kept answer
// comes at once rather than after the breaker's max_wait.
func (j *job) hasKept() bool {
	if _, on := j.cache(); !on || j.writer.Seq() > 0 {
		return false
	}
	_, ok := j.keptAnswer()
	return ok
}

// replay appends a kept answer's chunks, marked Cached, once the job's
// claim is stored; the end frame (endFrame) is marked from the outcome,
// and reports the kept answer's usage.
func (j *job) replay(a wire.CachedAnswer) outcome {
	if err := j.firstClaim.wait(); err != nil {
		return outcome{logErr: err}
	}
	for _, f := range a.Chunks {
		f.Kind, f.Cached = wire.KindChunk, true
		if err := j.writer.append(j.logCtx, f); err != nil {
			return outcome{logErr: err}
		}
		j.chunks++
		j.provider, j.model = f.Provider, f.Model
	}
	j.usage = a.Usage
	return outcome{finishReason: a.FinishReason, stopSequence: a.StopSequence, cached: true}
}

// keep stores the answer of a stream that ended done with end in its
// model's cache, if the cache is on for the tenant. The chunks are read
// back from the stream, so an answer continued across workers is kept
// whole. A failure costs only the entry, and is logged.
func (j *job) keep(end wire.Frame) {
	c, ok := j.cache()
	if !ok || end.Status != wire.StatusDone || end.Cached {
		return
	}
	key, err := answerKey(j.req.Tenant, j.req.Model, j.req.Body)
	if err != nil {
		j.log.Warn("answer not kept", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(j.logCtx, answerTimeout)
	defer cancel()
	a := wire.CachedAnswer{FinishReason: end.FinishReason, StopSequence: end.StopSequence, Usage: end.Usage,
		StreamID: j.req.StreamID, Stored: time.Now().UnixMilli()}
	_, err = j.w.reader.Read(ctx, j.req.StreamID, 0, func(e chunklog.Entry) error {
		if e.Frame.Kind == wire.KindChunk {
			a.Chunks = appendKept(a.Chunks, e.Frame)
		}
		return nil
	})
	if err == nil {
		err = j.w.answers.put(ctx, key, a, c.KeepFor())
	}
	if err != nil {
		j.log.Warn("answer not kept", "err", err)
	}
}

// appendKept appends chunk f to a kept answer's chunks without what
// belongs to its stream (sequence, attempt, seam, timing), merged into the
// last one when both hold text alone from the same model: a replay then
// appends fewer frames.
func appendKept(chunks []wire.Frame, f wire.Frame) []wire.Frame {
	f.Seq, f.Attempt, f.Seam, f.UpstreamTTFTMS = 0, 0, "", 0
	if n := len(chunks); n > 0 {
		last := &chunks[n-1]
		if f.Role == "" && textOnly(*last) && textOnly(f) &&
			last.Provider == f.Provider && last.Model == f.Model && last.SystemFingerprint == f.SystemFingerprint {
			last.Content += f.Content
			last.Tokens += f.Tokens
			return chunks
		}
	}
	return append(chunks, f)
}

// textOnly reports whether chunk f holds nothing but text and who
// generated it; compared by encoding, so that a member added to
// wire.Frame later is never merged away.
func textOnly(f wire.Frame) bool {
	bare := wire.Frame{Kind: f.Kind, Role: f.Role, Content: f.Content, Tokens: f.Tokens,
		Provider: f.Provider, Model: f.Model, SystemFingerprint: f.SystemFingerprint}
	return bytes.Equal(bare.Encode(), f.Encode())
}
