package main

import "time"

// openLoopPlan holds the counts and durations of the open-loop phase.
// They live beside the phase rather than in plan, keyed by the plan's
// mode.
type openLoopPlan struct {
	// The answer every load asks for: tokens at interval each (paced),
	// and the same answer at full speed for the full-speed capacity.
	tokens   int
	interval time.Duration

	// Full-speed capacity: fullClients back to back, counted for
	// fullWindow after fullWarm.
	fullClients          int
	fullWarm, fullWindow time.Duration
	// Paced capacity of the relay (separate processes), the loads'
	// reference: as many clients as keep requests waiting inside it.
	pacedClients           int
	pacedWarm, pacedWindow time.Duration

	// loads are the open-loop levels, as fractions of the paced
	// capacity, each offered for openDuration, or longer (up to twice
	// that) until minArrivals arrive, so that each has a p99; each
	// system takes a load in rounds, in turn.
	loads        []float64
	openDuration time.Duration
	minArrivals  int
	rounds       int

	// burst requests at once, bursts times (one round each).
	burst, bursts int
}

// openLoopPlans by plan mode. The quick plan keeps every figure and runs
// in about 15 s.
var openLoopPlans = map[string]openLoopPlan{
	"default": {
		tokens: 20, interval: 20 * time.Millisecond,
		fullClients: 100, fullWarm: 500 * time.Millisecond, fullWindow: 3 * time.Second,
		pacedClients: 400, pacedWarm: time.Second, pacedWindow: 4 * time.Second,
		loads: []float64{0.5, 0.8}, openDuration: 6 * time.Second, minArrivals: 150, rounds: 3,
		burst: 100, bursts: 3,
	},
	"quick": {
		tokens: 20, interval: 20 * time.Millisecond,
		fullClients: 100, fullWarm: 150 * time.Millisecond, fullWindow: 350 * time.Millisecond,
		pacedClients: 200, pacedWarm: 500 * time.Millisecond, pacedWindow: 600 * time.Millisecond,
		loads: []float64{0.5, 0.8}, openDuration: 400 * time.Millisecond, rounds: 1,
		burst: 100, bursts: 1,
	},
}
