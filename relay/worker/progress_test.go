package worker

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progressMsg counts the progress reports sent on a request message, and
// when the last was sent.
type progressMsg struct {
	jetstream.Msg
	reports atomic.Int64
	last    atomic.Int64 // unix nanoseconds
	err     error
}

func (m *progressMsg) InProgress() error {
	m.reports.Add(1)
	m.last.Store(time.Now().UnixNano())
	return m.err
}

// TestProgressReportsEveryHeldRequestTogether: every request kept in
// progress is reported once an interval, all in the same round, from the
// first round after it was kept, until it is let go; a report that fails
// does not stop the next.
func TestProgressReportsEveryHeldRequestTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProgress(10*time.Second, slog.New(slog.DiscardHandler))
		go p.run(t.Context())
		a, b := &progressMsg{}, &progressMsg{err: errors.New("connection closed")}
		stopA := p.keep(a)
		time.Sleep(3 * time.Second)
		stopB := p.keep(b) // kept mid-interval: first reported with a

		time.Sleep(33 * time.Second) // rounds at 10, 20 and 30 s
		synctest.Wait()
		if a.reports.Load() != 3 || b.reports.Load() != 3 {
			t.Fatalf("after 36s at one round per 10s: %d and %d reports, want 3 each", a.reports.Load(), b.reports.Load())
		}
		if a.last.Load() != b.last.Load() {
			t.Fatalf("the last reports went %v apart, want in one round", time.Duration(b.last.Load()-a.last.Load()))
		}

		stopA()
		stopA() // idempotent
		time.Sleep(time.Minute)
		synctest.Wait()
		if a.reports.Load() != 3 || b.reports.Load() != 9 {
			t.Fatalf("a minute after a was let go: %d and %d reports, want 3 and 9", a.reports.Load(), b.reports.Load())
		}
		stopB()
	})
}
