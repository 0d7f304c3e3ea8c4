package edge

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// The dashboard's charts cover the last recentSteps steps of recentStep.
const (
	recentStep  = 2 * time.Second
	recentSteps = 180 // six minutes
	// recentEnded bounds the stream ids remembered so that a stream's cost
	// is counted once however many of its clients see the end.
	recentEnded = 4096
)

// recent is what the dashboard charts: this edge's throughput, new streams
// and time to first token per step over the last minutes, and the cost of
// the streams that ended here, by requested model. It is a ring of steps
// advanced on use, so an idle edge does no work.
type recent struct {
	now func() time.Time

	mu    sync.Mutex
	steps [recentSteps]stepTally
	// head is the index of the step that holds time headAt.
	head   int
	headAt int64 // step number: unix nanos / recentStep

	cost map[string]float64
	// endedIDs remembers recent stream ids (a set and its insertion order).
	endedIDs   map[string]struct{}
	endedOrder []string
}

// stepTally is one step's tallies.
type stepTally struct {
	chunks, streams int
	ttftSum         time.Duration
	ttftCount       int
}

func newRecent(now func() time.Time) *recent {
	return &recent{now: now, headAt: now().UnixNano() / int64(recentStep), cost: map[string]float64{}, endedIDs: map[string]struct{}{}}
}

// step returns the current step, clearing the steps passed since the last
// use. The caller holds mu.
func (r *recent) step() *stepTally {
	at := r.now().UnixNano() / int64(recentStep)
	for n := min(at-r.headAt, recentSteps); n > 0; n-- {
		r.head = (r.head + 1) % recentSteps
		r.steps[r.head] = stepTally{}
	}
	if at > r.headAt {
		r.headAt = at
	}
	return &r.steps[r.head]
}

func (r *recent) delivered(chunks int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.step().chunks += chunks
}

func (r *recent) streamStarted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.step().streams++
}

func (r *recent) ttft(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.step()
	st.ttftSum += d
	st.ttftCount++
}

// ended adds a stream's cost under model, once per stream id.
func (r *recent) ended(id, model string, cost float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.endedIDs[id]; seen {
		return
	}
	if len(r.endedOrder) >= recentEnded {
		delete(r.endedIDs, r.endedOrder[0])
		r.endedOrder = r.endedOrder[1:]
	}
	r.endedIDs[id] = struct{}{}
	r.endedOrder = append(r.endedOrder, id)
	r.cost[model] += cost
}

// recentSeries is the charts' data, oldest step first.
type recentSeries struct {
	StepMS int64 `json:"step_ms"`
	// EndMS is the Unix time (ms) at which the last step ends.
	EndMS int64 `json:"end_ms"`
	// Chunks and Streams are counts per step; TTFTMS is the mean time to
	// first token of the streams started in the step, null without any.
	Chunks  []int      `json:"chunks"`
	Streams []int      `json:"streams"`
	TTFTMS  []*float64 `json:"ttft_ms"`
}

// modelCost is the cost of the streams that ended on this edge.
type modelCost struct {
	Model string  `json:"model"`
	USD   float64 `json:"usd"`
}

func (r *recent) snapshot() (recentSeries, []modelCost) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.step()
	s := recentSeries{
		StepMS:  recentStep.Milliseconds(),
		EndMS:   (r.headAt + 1) * int64(recentStep) / int64(time.Millisecond),
		Chunks:  make([]int, recentSteps),
		Streams: make([]int, recentSteps),
		TTFTMS:  make([]*float64, recentSteps),
	}
	for i := range recentSteps {
		st := r.steps[(r.head+1+i)%recentSteps]
		s.Chunks[i], s.Streams[i] = st.chunks, st.streams
		if st.ttftCount > 0 {
			ms := float64(st.ttftSum.Microseconds()) / 1e3 / float64(st.ttftCount)
			s.TTFTMS[i] = &ms
		}
	}
	costs := make([]modelCost, 0, len(r.cost))
	for m, usd := range r.cost {
		costs = append(costs, modelCost{Model: m, USD: usd})
	}
	slices.SortFunc(costs, func(a, b modelCost) int {
		if a.USD != b.USD {
			if a.USD > b.USD {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Model, b.Model)
	})
	return s, costs
}
