package edge

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// workerBoard follows the workers' heartbeats (wire.LivenessSubject)
// for the dashboard. It subscribes on first use, so an edge whose
// dashboard nobody opens receives none; the NATS user of such an edge
// needs subscribe permission on relay.liveness.
type workerBoard struct {
	nc  *nats.Conn
	log *slog.Logger

	once   sync.Once
	subErr error

	mu   sync.Mutex
	seen map[string]*workerSeen // by instance
}

type workerSeen struct {
	hb   wire.Heartbeat
	last time.Time
}

// workerView is one worker on the dashboard.
type workerView struct {
	Worker   string `json:"worker"`
	Instance string `json:"instance"`
	// Streams is how many requests it holds (Heartbeat.Held: a delta
	// beat lists only what changed).
	Streams int `json:"streams"`
	// SilentMS is the time since its last heartbeat; Late says it is past
	// its liveness timeout (its requests are being handed over).
	SilentMS int64 `json:"silent_ms"`
	Late     bool  `json:"late"`
}

func newWorkerBoard(nc *nats.Conn, log *slog.Logger) *workerBoard {
	return &workerBoard{nc: nc, log: log, seen: map[string]*workerSeen{}}
}

// list starts following heartbeats if it did not yet, and returns the
// workers heard within three liveness timeouts, by name.
func (b *workerBoard) list() ([]workerView, error) {
	b.once.Do(func() {
		_, b.subErr = b.nc.Subscribe(wire.LivenessSubject, b.heard)
		if b.subErr != nil {
			b.log.Warn("dashboard: not following worker heartbeats", "err", b.subErr)
		}
	})
	if b.subErr != nil {
		return nil, b.subErr
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]workerView, 0, len(b.seen))
	for inst, w := range b.seen {
		silent := now.Sub(w.last)
		if silent > 3*w.hb.Timeout() {
			delete(b.seen, inst)
			continue
		}
		out = append(out, workerView{
			Worker:   w.hb.Worker,
			Instance: w.hb.Instance,
			Streams:  w.hb.Held,
			SilentMS: silent.Milliseconds(),
			Late:     silent > w.hb.Timeout(),
		})
	}
	slices.SortFunc(out, func(a, b workerView) int {
		return strings.Compare(a.Worker+a.Instance, b.Worker+b.Instance)
	})
	return out, nil
}

// maxWorkersSeen bounds the board against a flood of made-up instances.
const maxWorkersSeen = 1024

func (b *workerBoard) heard(m *nats.Msg) {
	var hb wire.Heartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil || hb.Instance == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if hb.Leaving {
		delete(b.seen, hb.Instance)
		return
	}
	if _, ok := b.seen[hb.Instance]; !ok && len(b.seen) >= maxWorkersSeen {
		return
	}
	b.seen[hb.Instance] = &workerSeen{hb: hb, last: time.Now()}
}
