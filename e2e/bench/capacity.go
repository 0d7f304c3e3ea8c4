package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// capResult is what a closed-loop saturation step measured.
type capResult struct {
	// rate is the exact streams per second that ended in the window.
	rate           float64
	counted        int
	clients        int
	streams, exact int
	// dials counts the connections the clients opened: as many as the
	// clients when a connection carries stream after stream, as many as
	// the streams when each response ends its connection.
	dials           int64
	firstFailure    string
	ttft            dist // of the streams counted, ms
	warm, window    time.Duration
	unsaturatedHint bool // the clients waited less than a stream lasts
}

func (r capResult) summary() string {
	s := fmt.Sprintf("%.0f req/s: %d clients back to back, %d exact streams ended in the %v after a %v warm-up (%d of %d exact in all, on %d connections), time to first token %s ms",
		r.rate, r.clients, r.counted, r.window, r.warm, r.exact, r.streams, r.dials, num(r.ttft.Median))
	if r.unsaturatedHint {
		s += " (not saturated: a lower bound)"
	}
	if r.firstFailure != "" {
		s += ", first failure: " + r.firstFailure
	}
	return s
}

// capacity runs clients clients streaming conv back to back against t,
// all starting at once, and counts the exact streams that end within
// window after warm: with enough clients that requests wait inside the
// system, that is the request rate the system sustains. Streams that are
// still open at the end are read to their end, so that the next load
// starts on an idle system (the relay's workers finish a generation
// whether or not its client stays).
func (b *bench) capacity(ctx context.Context, t target, conv conversation, clients int, warm, window time.Duration, streamLen time.Duration) (capResult, error) {
	hc := newHTTPClient(clients, true)
	defer hc.CloseIdleConnections()
	var dials atomic.Int64
	tr := hc.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	res := capResult{clients: clients, warm: warm, window: window}
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+window)
	var mu sync.Mutex
	var counted []time.Duration
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(until) && ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				r := runStream(sctx, hc, t.url, conv, streamOpts{})
				cancel()
				end := time.Now()
				mu.Lock()
				res.streams++
				switch {
				case !r.exact(conv.answer):
					if res.firstFailure == "" {
						res.firstFailure = fmt.Sprintf("%v (%d of %d bytes)", r.Err, len(r.Text), len(conv.answer))
					}
				default:
					res.exact++
					if !end.Before(from) && end.Before(until) {
						counted = append(counted, r.TTFT())
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.dials = dials.Load()
	res.counted = len(counted)
	res.rate = float64(len(counted)) / window.Seconds()
	res.ttft = summarize(ms(counted))
	// A saturated system makes requests wait: in a closed loop each
	// client's stream then takes longer than the upstream's answer.
	res.unsaturatedHint = time.Duration(res.ttft.Median*float64(time.Millisecond)) < streamLen/2
	b.log.printf("  %s capacity: %s", t.name, res.summary())
	return res, ctx.Err()
}
