package worker

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progressMsg counts the progress reports sent on a request message.
type progressMsg struct {
	jetstream.Msg
	reports atomic.Int64
}

func (m *progressMsg) InProgress() error {
	m.reports.Add(1)
	return nil
}

func TestKeepInProgressReportsEveryIntervalUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		msg := &progressMsg{}
		stop := keepInProgress(msg, 10*time.Second, slog.New(slog.DiscardHandler))

		time.Sleep(35 * time.Second)
		synctest.Wait()
		if got := msg.reports.Load(); got != 3 {
			t.Fatalf("after 35s at one report per 10s: %d reports, want 3", got)
		}

		stop()
		stop() // idempotent
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := msg.reports.Load(); got != 3 {
			t.Fatalf("reports after stop: %d in all, want still 3", got)
		}
	})
}
