package breaker

// Streak counts one node's failures in a row on one breaker: the signal
// that trips it. A success ends the streak; a neutral verdict leaves it
// alone. The zero Streak is ready to use; it is not safe for concurrent
// use.
type Streak struct{ n int }

// Observe records a verdict and reports whether the streak has reached
// threshold (which a negative threshold never does).
func (s *Streak) Observe(v Verdict, threshold int) bool {
	switch v {
	case Success:
		s.n = 0
	case Failure:
		s.n++
	}
	return threshold > 0 && s.n >= threshold
}

// Reset ends the streak, once the breaker it counts for has opened.
func (s *Streak) Reset() { s.n = 0 }
