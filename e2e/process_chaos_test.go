package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
)

// Chaos. 100 streams over 2 edges and 3 workers; every client drops its
// connection at random moments and resumes on a random edge; every couple
// of seconds a worker is SIGKILLed and started again (and every third fault
// is a SIGSTOP of a few seconds instead, so that fencing is exercised under
// load too). Every transcript is exactly the fault-free answer and every
// stream ends done. The test prints how many resumes, takeovers and fenced
// writes it took.
func TestProcessChaos(t *testing.T) {
	const (
		tokens  = 200 // 8 s at 40 ms
		streams = 100
		stagger = 30 * time.Millisecond // starts spread over 3 s
		// dropChance per event gives each client about two drops.
		dropChance = 2.0 / tokens
	)
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 2, Workers: 3, Coordinator: true})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	edges := []string{s.edgeProcs[0].URL, s.edgeProcs[1].URL}

	started := time.Now()
	clients := make([]*pclient, streams)
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			time.Sleep(time.Duration(i) * stagger)
			msgs, want := prompt(fmt.Sprintf("Process test: chaos stream %d.", i), tokens)
			c, err := postStream(ctx, edges[rng.IntN(2)], msgs, want, nil)
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			pick := func() string { return edges[rng.IntN(2)] }
			drop := func() bool { return rng.Float64() < dropChance }
			if errs[i] = c.finish(ctx, pick, drop); errs[i] == nil {
				errs[i] = c.check()
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	// Faults, one at a time, until every stream is done.
	rng := rand.New(rand.NewPCG(seed, 1<<32))
	var kills, pauses int
faults:
	for fault := 0; ; fault++ {
		select {
		case <-allDone:
			break faults
		case <-time.After(time.Duration(1500+rng.IntN(1000)) * time.Millisecond):
		}
		// The busiest worker, so that every fault reaches streams.
		i := 0
		for j, w := range s.workerProcs {
			if s.frames.held(w.Name) > s.frames.held(s.workerProcs[i].Name) {
				i = j
			}
		}
		w := s.workerProcs[i]
		t.Logf("%v: %s %s holding %d streams", time.Since(started).Round(time.Millisecond),
			map[bool]string{true: "SIGSTOP", false: "SIGKILL"}[fault%3 == 2], w.Name, s.frames.held(w.Name))
		if fault%3 == 2 {
			pauses++
			// Longer than a liveness timeout of silence plus one of an
			// unanswered probe (3 s by default), so its streams are
			// taken over and it wakes fenced.
			must(t, pauseFor(w, 4*time.Second, allDone))
			continue
		}
		kills++
		must(t, w.Kill())
		next, err := s.procs.Restart(ctx, w)
		must(t, err)
		s.workerProcs[i] = next
	}
	elapsed := time.Since(started)

	var failed int
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("stream %d: %v", i, err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d streams failed", failed, streams)
	}

	var resumes, takeovers, broken int
	var worst time.Duration
	var worstClient *pclient
	for _, c := range clients {
		resumes += c.resumes
		takeovers += c.seams["takeover"]
		for _, n := range c.broken {
			broken += n
		}
		if gap := c.maxGap(c.at[0]); gap > worst {
			worst, worstClient = gap, c
		}
	}
	// The longest silence, and who held that stream when.
	var owners []string
	for _, c := range s.frames.claims(worstClient.id) {
		owners = append(owners, fmt.Sprintf("%s at %v", c.Frame.Worker, c.At.Sub(started).Round(time.Millisecond)))
	}
	var silentFrom time.Time
	for i := 1; i < len(worstClient.at); i++ {
		if worstClient.at[i].Sub(worstClient.at[i-1]) == worst {
			silentFrom = worstClient.at[i-1]
		}
	}
	t.Logf("longest silence %v, from %v, in stream %s, claimed by %v", worst.Round(time.Millisecond),
		silentFrom.Sub(started).Round(time.Millisecond), worstClient.id, owners)
	var workerProcs []*procs.Process
	for _, p := range s.procs.Processes() {
		if len(logged(p, "worker started", "")) > 0 {
			workerProcs = append(workerProcs, p)
		}
	}
	first := map[string]int{}
	for _, c := range clients {
		if claims := s.frames.claims(c.id); len(claims) > 0 {
			first[claims[0].Frame.Worker]++
		}
	}
	t.Logf("first claims per worker: %v", first)
	handovers := countLogged(s.procs.Processes(), "handed over a silent worker's request")
	fenced := countJobStatus(workerProcs, "fenced")
	t.Logf("chaos: %d streams done and exact in %v; %d worker kills, %d pauses; %d resumes (%d by the edge ending a response), "+
		"%d takeovers seen by clients (%d liveness handovers logged), %d fenced writes (jobs ended fenced); longest silence in a stream %v",
		streams, elapsed.Round(time.Millisecond), kills, pauses, resumes, broken, takeovers, handovers, fenced, worst.Round(time.Millisecond))
	if kills == 0 || takeovers == 0 {
		t.Errorf("%d kills and %d takeovers: the chaos did not reach the streams", kills, takeovers)
	}
	expectRunning(t, append(append([]*procs.Process{s.coordProc}, s.workerProcs...), s.edgeProcs...)...)
}

// pauseFor stops p with SIGSTOP for d (or until done closes) and resumes it.
func pauseFor(p *procs.Process, d time.Duration, done <-chan struct{}) error {
	if err := p.Stop(); err != nil {
		return err
	}
	select {
	case <-time.After(d):
	case <-done:
	}
	return p.Cont()
}
