package worker

import (
	"sync"
	"time"
)

// settler holds what is left to do once a stream's end frame is stored
// (record its usage, then ack its request) and does it for every stream
// that ended within a linger at once. On a replicated cluster each usage
// record and each ack is a raft proposal of its own when it reaches the
// server alone, and proposals that arrive together share a round: the
// same reason the progress reports go in one round (progress.go). Neither
// is waited for by a client: the end frame is what the client sees, and
// a request whose ack is late, or lost, only comes back to a worker that
// finds the end frame and acks it (job.claimStream).
//
// The slot of the job is free as soon as its settlement is queued. Run
// settles what is queued before it returns.
type settler struct {
	// linger is how long a settlement waits for others; zero settles
	// each at once (one server, where proposals are not replicated).
	linger time.Duration
	// run runs one settlement: they all start together.
	run func(func())

	mu      sync.Mutex
	queue   []func()
	timer   *time.Timer
	pending sync.WaitGroup
}

// settleLinger is how long a stream's settlement waits for others'. The
// ack and the usage of a stream wait for no client; 20 ms groups the
// settlements of every stream a busy worker ends in that time (at 500
// streams a second, about ten), the linger group commit chose for the
// frames themselves (e2e/BENCHMARKS.md, "Choices the figures decided").
const settleLinger = 20 * time.Millisecond

func newSettler(linger time.Duration, run func(func())) *settler {
	return &settler{linger: linger, run: run}
}

// later queues f, the settlement of one stream.
func (s *settler) later(f func()) {
	s.pending.Add(1)
	if s.linger <= 0 {
		s.run(func() {
			defer s.pending.Done()
			f()
		})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, f)
	if s.timer == nil {
		s.timer = time.AfterFunc(s.linger, s.flush)
	}
}

// flush starts every queued settlement.
func (s *settler) flush() {
	s.mu.Lock()
	queue := s.queue
	s.queue, s.timer = nil, nil
	s.mu.Unlock()
	for _, f := range queue {
		s.run(func() {
			defer s.pending.Done()
			f()
		})
	}
}

// close settles what is queued now and waits for every settlement.
func (s *settler) close() {
	s.mu.Lock()
	t := s.timer
	s.mu.Unlock()
	if t != nil && t.Stop() {
		s.flush()
	}
	s.pending.Wait()
}
