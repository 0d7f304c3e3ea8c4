package liveness

import (
	"fmt"
	"time"
)

// A judgement must not feed itself. Handing a live worker's requests over
// loads the server (a KV write, a NAK, a takeover elsewhere), which makes
// more heartbeats late, which hands more live workers over: the storm
// seen with 10,000 streams on two cores. A probe that times out proves
// little when the delay may be the watcher's or the server's, so the
// watcher holds a judgement on a timed-out probe when it sees any sign of
// that:
//
//   - its own echo came back later than a quarter of the worker's timeout
//     at some point of the worker's silence (the beats may be queued
//     behind it);
//   - another worker is silent past its timeout too, or one was handed
//     over on a timed-out probe less than two of this worker's timeouts
//     ago: a fleet-wide stall is far more likely the server, or the
//     handovers themselves, than workers dying together;
//   - a probe answered (by the worker, or with no responders) took longer
//     than a quarter of the probed worker's timeout less than two of this
//     worker's timeouts ago: the server is slow.
//
// A held worker keeps its requests and is probed again at the next
// tick, for as long as it stays silent: the server's "no responders"
// (hard evidence that its connection is gone) hands it over whatever the
// signs, a beat or an answer clears it, and a timed-out probe once the
// signs are gone hands it over. Meanwhile a paused worker's requests fall
// back to AckWait, which costs a few seconds, where a false handover
// costs a generation and feeds the storm.

// holdMemory is how long, in timeouts of the worker judged, a handover on
// a timed-out probe or a slow probe makes the watcher want hard evidence.
const holdMemory = 2

// behindLimit is how late the watcher's echo may come before its silence
// judgements of a worker of this timeout are in doubt: a quarter of it,
// but never less than a tick (the echo's own resolution).
func behindLimit(timeout time.Duration) time.Duration {
	return max(timeout/4, watchTick)
}

// lag is how late the watcher's newest echo is at now: a ping goes out
// every tick, so an echo up to a tick old is on time. lw.mu must be held.
func (lw *livenessWatch) lag(now time.Time) time.Duration {
	return max(now.Sub(lw.echoSent)-watchTick, 0)
}

// holdReason says why a timed-out probe of instance (p) does not hand it
// over now, or "" if nothing does. lw.mu must be held.
func (lw *livenessWatch) holdReason(instance string, p *peer, now time.Time) string {
	if lag := max(p.lagPeak, lw.lag(now)); lag > behindLimit(p.timeout) {
		return fmt.Sprintf("the watcher's own echo came %v late during the silence", lag.Round(time.Millisecond))
	}
	silent := 0
	for other, q := range lw.peers {
		if other != instance && now.Sub(q.heard) > q.timeout {
			silent++
		}
	}
	memory := holdMemory * p.timeout
	switch {
	case silent > 0:
		return fmt.Sprintf("other workers silent past their timeout: %d", silent)
	case !lw.mutedAt.IsZero() && now.Sub(lw.mutedAt) < memory:
		return fmt.Sprintf("another worker was handed over on a timed-out probe %v ago", now.Sub(lw.mutedAt).Round(time.Millisecond))
	case !lw.slowAt.IsZero() && now.Sub(lw.slowAt) < memory:
		return fmt.Sprintf("a probe took %v %v ago", lw.slowTook.Round(time.Millisecond), now.Sub(lw.slowAt).Round(time.Millisecond))
	}
	return ""
}

// noteRoundTrip remembers a probe answered slowly: the server is behind.
// lw.mu must be held.
func (lw *livenessWatch) noteRoundTrip(a probeAnswer, now time.Time) {
	if (a.verdict == verdictAlive || a.verdict == verdictGone) && a.took > behindLimit(a.timeout) {
		lw.slowAt, lw.slowTook = now, a.took
	}
}

// hold keeps p's requests after a timed-out probe for reason, and has it
// probed again at the next tick, over a fresh window. lw.mu must be held.
func (lw *livenessWatch) hold(instance string, p *peer, reason string, now time.Time) {
	lw.held++
	p.probed, p.lagPeak = time.Time{}, lw.lag(now)
	lw.logger.Info("a silent worker did not answer its probe, but the watcher or the server may be behind; it keeps its requests until the server reports it gone (no responders) or the doubt passes",
		"silent_worker", p.worker, "instance", instance, "silent_for", now.Sub(p.heard).Round(time.Millisecond),
		"reason", reason, "judgements_held", lw.held)
}
