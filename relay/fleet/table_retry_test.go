package fleet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// flakyKV is a bucket whose watches are given by watches, one a start;
// a nil one fails to start. Past the list, a watch never ends.
type flakyKV struct {
	KV
	starts  []time.Duration
	start   time.Time
	watches []*fakeWatcher
}

func (kv *flakyKV) Bucket() string { return "test" }

func (kv *flakyKV) WatchFiltered(context.Context, []string, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv.starts = append(kv.starts, time.Since(kv.start))
	if len(kv.watches) == 0 {
		return &fakeWatcher{updates: make(chan jetstream.KeyValueEntry)}, nil
	}
	w := kv.watches[0]
	kv.watches = kv.watches[1:]
	if w == nil {
		return nil, errors.New("nats: no responders available for request")
	}
	return w, nil
}

type fakeWatcher struct{ updates chan jetstream.KeyValueEntry }

func (w *fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w *fakeWatcher) Stop() error                             { return nil }

// replayedThenClosed is a watch that replays an empty bucket, then ends
// (the server restarted).
func replayedThenClosed() *fakeWatcher {
	w := &fakeWatcher{updates: make(chan jetstream.KeyValueEntry, 1)}
	w.updates <- nil
	close(w.updates)
	return w
}

// A watch that fails starts again after a backoff that grows to its cap;
// one that got through its replay before it ended starts the backoff
// over.
func TestTableWatchStartsAgainWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := &flakyKV{start: time.Now(), watches: []*fakeWatcher{nil, nil, nil, nil, replayedThenClosed(), nil}}
		tab := NewTable[int](kv, nil)
		// The longest delays the backoff can draw: just under its ceilings.
		tab.retry.Rand = func(n int64) int64 { return n - 1 }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tab.Run(ctx)
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		// Waits of 1s, 2s, 4s, 4s, then 1s after the replay, then 2s.
		want := []time.Duration{0, time.Second - 1, 3*time.Second - 2, 7*time.Second - 3, 11*time.Second - 4, 12*time.Second - 5, 14*time.Second - 6}
		if !slices.Equal(kv.starts, want) {
			t.Fatalf("watches started at %v, want %v", kv.starts, want)
		}
		select {
		case <-tab.synced:
		default:
			t.Fatal("not synced after a replay")
		}
		cancel()
		<-done
	})
}
