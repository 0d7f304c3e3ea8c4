package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
)

// KV is what a Table needs of a bucket; jetstream.KeyValue (and a region's
// view of a shared bucket) satisfies it.
type KV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
	Bucket() string
}

// Row is a key's value with the revision it was read at.
type Row[T any] struct {
	Value T
	Rev   uint64
}

// Table is the local copy of a bucket's keys (or of those matching a
// filter), each decoded from JSON into T. Run keeps it current through a
// watch; Update changes a key with a revision check. It is safe for
// concurrent use.
type Table[T any] struct {
	kv      KV
	filters []string
	log     *slog.Logger
	// retry spaces the starts of a watch that failed (watchRetry).
	retry backoff.Backoff
	// OnChange, if set before Run, is called (without locks held) for
	// every change the watch brings, with ok false for a deleted key.
	OnChange func(key string, row Row[T], ok bool)

	mu   sync.Mutex
	rows map[string]Row[T]
	// revs is the latest revision of each key the copy took, a deletion's
	// too: an older word on a key never replaces a newer one.
	revs    map[string]uint64
	changed chan struct{}
	synced  chan struct{}
	once    sync.Once
}

// NewTable returns an empty table of kv; filters ("demand.>") restrict it
// to matching keys, none means every key.
func NewTable[T any](kv KV, logger *slog.Logger, filters ...string) *Table[T] {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	return &Table[T]{
		kv: kv, filters: filters, log: logger.With("bucket", kv.Bucket()), retry: watchRetry,
		rows: map[string]Row[T]{}, revs: map[string]uint64{}, changed: make(chan struct{}), synced: make(chan struct{}),
	}
}

// watchRetry spaces the starts of a watch that failed or ended (NATS
// away, the bucket missing).
var watchRetry = backoff.Backoff{Config: backoff.Config{Base: time.Second, Cap: 4 * time.Second}}

// Run follows the bucket until ctx ends. A watch that fails starts again,
// replaying every key, so the copy converges after any outage; meanwhile
// the copy keeps its last known state.
func (t *Table[T]) Run(ctx context.Context) error {
	// A watch that got through its replay worked until it ended: a new
	// outage starts the backoff over.
	t.retry.Rerun(ctx, t.watch, func(err error, d time.Duration) {
		t.log.Debug("state watch ended; starting it again", "err", err, "in", d)
	})
	return nil
}

// watch follows the bucket until ctx ends or the watch fails; replayed
// reports that it got through the replay of every key.
func (t *Table[T]) watch(ctx context.Context) (replayed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// nats.go rewrites the filters into subjects in place: a restarted
	// watch must get the keys again, not the subjects of the last one.
	w, err := t.kv.WatchFiltered(ctx, slices.Clone(t.filters))
	if err != nil {
		return false, err
	}
	defer w.Stop()
	seen := map[string]bool{}
	initial := true
	for {
		select {
		case <-ctx.Done():
			return !initial, nil
		case e, ok := <-w.Updates():
			if !ok {
				return !initial, errors.New("fleet: watch closed")
			}
			if e == nil {
				// The replay is over: keys it did not bring are gone.
				if initial {
					t.prune(seen)
					initial = false
					t.once.Do(func() { close(t.synced) })
				}
				continue
			}
			if initial {
				seen[e.Key()] = true
			}
			t.apply(e)
		}
	}
}

// apply takes an entry from the watch. The watch delivers in order, so
// its latest word on a key wins.
func (t *Table[T]) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		t.set(key, Row[T]{Rev: e.Revision()}, false)
		return
	}
	var v T
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.log.Warn("undecodable state ignored", "key", key, "err", err)
		return
	}
	t.set(key, Row[T]{Value: v, Rev: e.Revision()}, true)
}

func (t *Table[T]) prune(keep map[string]bool) {
	t.mu.Lock()
	var gone []string
	for k := range t.rows {
		if !keep[k] {
			gone = append(gone, k)
		}
	}
	t.mu.Unlock()
	for _, k := range gone {
		t.set(k, Row[T]{}, false)
	}
}

// set takes row for key (ok), or the key's deletion at row.Rev, unless the
// copy holds a later revision of the key already. A write's own result or
// a read (Update) can race the watch: applied after the watch brought a
// later change, it would take the copy back to a state that no change
// will correct (seen: a breaker left half-open in one worker's copy for
// good, its waiting requests refused after max_wait). A deletion without
// a revision (the watch's replay no longer has the key) always applies.
func (t *Table[T]) set(key string, row Row[T], ok bool) {
	t.mu.Lock()
	if row.Rev != 0 && row.Rev < t.revs[key] {
		t.mu.Unlock()
		return
	}
	if row.Rev != 0 {
		t.revs[key] = row.Rev
	}
	_, had := t.rows[key]
	if ok {
		t.rows[key] = row
	} else {
		delete(t.rows, key)
	}
	if ok || had {
		close(t.changed)
		t.changed = make(chan struct{})
	}
	t.mu.Unlock()
	if (ok || had) && t.OnChange != nil {
		t.OnChange(key, row, ok)
	}
}

// Get returns the local copy of key.
func (t *Table[T]) Get(key string) (Row[T], bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rows[key]
	return r, ok
}

// All returns a copy of every row.
func (t *Table[T]) All() map[string]Row[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Row[T], len(t.rows))
	for k, r := range t.rows {
		out[k] = r
	}
	return out
}

// Changed is closed at the next change of any key.
func (t *Table[T]) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Synced is closed once the first watch replayed every key.
func (t *Table[T]) Synced() <-chan struct{} { return t.synced }

// ErrNoChange, returned by an Update's next function, leaves the key as it
// is.
var ErrNoChange = errors.New("fleet: no change")

// updateAttempts bounds the compare-and-swap retries of one Update.
const updateAttempts = 4

// Update changes key with a revision check: next computes the new value
// from the current one (the local copy first, then, after a conflict, a
// fresh read), and the write succeeds only if nobody wrote in between;
// otherwise it is computed again, at most updateAttempts times. It returns
// the value now stored and whether this call wrote it. A next that returns
// ErrNoChange ends the update without writing (written is false); any
// other error of next ends it with that error. A write that failed without
// a revision conflict (a timeout) but was stored all the same counts as
// written.
func (t *Table[T]) Update(ctx context.Context, key string, next func(cur T, exists bool) (T, error)) (v T, written bool, err error) {
	row, exists := t.Get(key)
	for attempt := 0; ; attempt++ {
		nv, err := next(row.Value, exists)
		if errors.Is(err, ErrNoChange) {
			return row.Value, false, nil
		}
		if err != nil {
			return row.Value, false, err
		}
		data, err := json.Marshal(nv)
		if err != nil {
			return row.Value, false, fmt.Errorf("fleet: encode %s: %w", key, err)
		}
		var rev uint64
		if exists {
			rev, err = t.kv.Update(ctx, key, data, row.Rev)
		} else {
			rev, err = t.kv.Create(ctx, key, data)
		}
		if err != nil && !conflict(err) {
			// A write that timed out may have been stored all the same
			// (a probe claim, say, that nobody would then use).
			rev, err = t.stored(ctx, key, data, err)
		}
		if err == nil {
			t.set(key, Row[T]{Value: nv, Rev: rev}, true)
			return nv, true, nil
		}
		if !conflict(err) || attempt+1 >= updateAttempts {
			return row.Value, false, fmt.Errorf("fleet: update %s/%s: %w", t.kv.Bucket(), key, err)
		}
		row, exists, err = t.read(ctx, key)
		if err != nil {
			return row.Value, false, err
		}
	}
}

// storedCheck bounds the read that checks whether a failed write was
// stored; it runs even if the caller's context has ended.
const storedCheck = time.Second

// stored returns the key's revision if the bucket holds exactly data
// (bytes that hold a random probe id or a time, so nobody else wrote
// them), else the write's error werr.
func (t *Table[T]) stored(ctx context.Context, key string, data []byte, werr error) (uint64, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storedCheck)
	defer cancel()
	e, err := t.kv.Get(rctx, key)
	if err != nil || !bytes.Equal(e.Value(), data) {
		return 0, werr
	}
	return e.Revision(), nil
}

// read fetches key from the bucket and refreshes the local copy with it.
func (t *Table[T]) read(ctx context.Context, key string) (Row[T], bool, error) {
	e, err := t.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		// The copy is left to the watch, which brings the deletion with
		// its revision.
		return Row[T]{}, false, nil
	case err != nil:
		return Row[T]{}, false, fmt.Errorf("fleet: read %s/%s: %w", t.kv.Bucket(), key, err)
	}
	var v T
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return Row[T]{}, false, fmt.Errorf("fleet: decode %s/%s: %w", t.kv.Bucket(), key, err)
	}
	row := Row[T]{Value: v, Rev: e.Revision()}
	t.set(key, row, true)
	return row, true, nil
}

// conflict reports whether err is a failed revision check.
func conflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return strings.Contains(err.Error(), "wrong last sequence")
}
