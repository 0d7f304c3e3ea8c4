package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// plan holds every count and duration of a run. The default plan fits in
// ten minutes on two cores, the quick plan in one: it keeps every figure
// but with fewer samples and smaller loads, so that CI proves the
// benchmark still runs.
type plan struct {
	mode string
	// h2c has the open-loop and concurrent phases' relay, and the bare
	// proxy, call the fake upstreams over HTTP/2 without TLS, as they
	// call a provider over TLS that offers HTTP/2 (--h2c); otherwise
	// over HTTP/1.1, as a plain-http provider.
	h2c bool
	// openLoopCapacity, if set, replaces the paced capacity the open-loop
	// phase measures as its loads' reference (--capacity).
	openLoopCapacity float64
	// openLoopTokens, if set, replaces the length of the open-loop
	// phase's answers (--answer-tokens).
	openLoopTokens int
	// profileDir, if set, receives CPU profiles of the open-loop phase's
	// relay processes (--profile, profile.go).
	profileDir string

	kvSamples int

	// JetStream writes alone and together: messages per way and run, and
	// runs; requests held for the progress reports.
	roundsMessages, roundsRuns int
	progressHeld               int

	// End-to-end throughput, fake upstream at full speed.
	tputStreams  int // concurrent streams
	tputTokens   int // answer length at full speed
	tputPaced    mockSpec
	tputDuration time.Duration // of each of the two runs
	// ceilingDuration is how long the JetStream async publish runs.
	ceilingDuration time.Duration

	// Time to first token and inter-chunk gaps, at each level.
	paced  mockSpec
	levels []level

	// Concurrent SSE streams on one edge, run twice: conc paces tokens so
	// that concStreams of them need a total chunk rate well within what
	// the relay delivers on two cores (concurrency and memory figures);
	// concFast at one token per second per stream (a throughput figure).
	// Each stream must last longer than the ramp, so that all are open at
	// once.
	concStreams int
	concWorkers int
	conc        mockSpec
	concFast    mockSpec
	// concFastOnly skips the paced run (--fast-only), to repeat the
	// 1 token/s run alone.
	concFastOnly bool
	// concRamp bounds the time spent opening streams: a relay that
	// cannot open them all in that time has its figure taken as it is.
	concRamp time.Duration

	// Resume of a long stream with others interleaved.
	resumeChunks  int
	resumeOthers  int
	resumeSamples int

	// Durable Streams: the measured stream's messages, the streams
	// appended to beside it, reads of it, and open live=sse readers.
	durableMessages, durableOthers, durableSamples, durableReaders int

	// Breaker propagation: rounds, workers, and how often a probe
	// request is queued.
	breakerRounds     int
	breakerWorkers    int
	breakerProbeEvery time.Duration

	// Worker memory: generations opened on one worker, their upstream,
	// how long the samples wait for all of them to be in flight, and how
	// many samples are taken.
	memGenerations int
	mem            mockSpec
	memRamp        time.Duration
	memSamples     int

	// Worker failover.
	failoverRounds  int
	failoverStreams int
	// failoverTokens at 25 ms/token must outlast the kill plus AckWait.
	failoverTokens int
}

// level is one concurrency of the latency figures and how long it runs
// against each target.
type level struct {
	streams  int
	duration time.Duration
}

// paced answers like a fast real model: 40 tokens/s. 20 tokens make a
// stream last half a second, so even one client collects samples quickly.
var paced = mockSpec{model: "paced", tokens: 20, interval: 25 * time.Millisecond}

// tputPaced sends 500 tokens/s per stream: slower than a chunk publish,
// so on an idle relay each token is its own chunk.
var tputPaced = mockSpec{model: "paced2ms", tokens: 500, interval: 2 * time.Millisecond}

func defaultPlan() plan {
	return plan{
		mode:            "default",
		kvSamples:       1000,
		roundsMessages:  3000,
		roundsRuns:      3,
		progressHeld:    5000,
		tputStreams:     64,
		tputTokens:      1000,
		tputPaced:       tputPaced,
		tputDuration:    15 * time.Second,
		ceilingDuration: 5 * time.Second,
		paced:           paced,
		levels:          []level{{1, 10 * time.Second}, {100, 15 * time.Second}, {1000, 20 * time.Second}},
		concStreams:     10_000,
		concWorkers:     4,
		// One token per 5 s: 10,000 streams need 2,000 chunks/s, where
		// 64 streams get about 14,000 through. 75 s per stream: longer
		// than the 30-45 s one edge takes to open 10,000.
		conc:           mockSpec{model: "slow", tokens: 15, interval: 5 * time.Second},
		concFast:       mockSpec{model: "slow", tokens: 60, interval: time.Second},
		concRamp:       90 * time.Second,
		resumeChunks:   2000,
		resumeOthers:   1000,
		resumeSamples:  300,
		memGenerations: 500,
		// 40 s per stream: all 500 are still in flight when the last
		// one starts, even on a busy machine where a few wait long for
		// their first token.
		mem:               mockSpec{model: "memory", tokens: 40, interval: time.Second},
		memRamp:           20 * time.Second,
		memSamples:        12,
		breakerRounds:     20,
		breakerWorkers:    3,
		breakerProbeEvery: time.Millisecond,
		failoverRounds:    3,
		failoverStreams:   8,
		failoverTokens:    300,

		durableMessages: 2000, durableOthers: 50, durableSamples: 300, durableReaders: 2000,
	}
}

func quickPlan() plan {
	return plan{
		mode:              "quick",
		kvSamples:         200,
		roundsMessages:    400,
		roundsRuns:        1,
		progressHeld:      500,
		tputStreams:       64,
		tputTokens:        400,
		tputPaced:         mockSpec{model: tputPaced.model, tokens: 200, interval: tputPaced.interval},
		tputDuration:      time.Second,
		ceilingDuration:   1200 * time.Millisecond,
		paced:             paced,
		levels:            []level{{1, time.Second}, {100, time.Second}, {300, time.Second}},
		concStreams:       500,
		concWorkers:       2,
		conc:              mockSpec{model: "slow", tokens: 2, interval: 2 * time.Second},
		concFast:          mockSpec{model: "slow", tokens: 3, interval: time.Second},
		concRamp:          10 * time.Second,
		resumeChunks:      600,
		resumeOthers:      200,
		resumeSamples:     50,
		memGenerations:    100,
		mem:               mockSpec{model: "memory", tokens: 6, interval: 400 * time.Millisecond},
		memRamp:           time.Second,
		memSamples:        4,
		breakerRounds:     3,
		breakerWorkers:    3,
		breakerProbeEvery: time.Millisecond,
		failoverRounds:    1,
		failoverStreams:   4,
		failoverTokens:    160,

		durableMessages: 600, durableOthers: 20, durableSamples: 50, durableReaders: 200,
	}
}

// pickLevels returns the latency levels named in list (concurrencies,
// comma-separated). A level of the plan keeps its duration; another runs
// as long as the plan's longest.
func (p plan) pickLevels(list string) ([]level, error) {
	longest := time.Duration(0)
	for _, l := range p.levels {
		longest = max(longest, l.duration)
	}
	var out []level
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--levels: %q is not a positive count", f)
		}
		l := level{streams: n, duration: longest}
		for _, pl := range p.levels {
			if pl.streams == n {
				l = pl
			}
		}
		out = append(out, l)
	}
	return out, nil
}
