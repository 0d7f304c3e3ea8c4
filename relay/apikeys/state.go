package apikeys

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"
)

// State is what the checks of a key found.
type State string

const (
	// Pending: not checked yet, or the checks so far could not tell (the
	// provider unreachable, a 5xx, a 429). Checks go on; the key is used
	// only while no key is verified.
	Pending State = "pending"
	// Verified: the provider took the key.
	Verified State = "verified"
	// Failed: the provider refused the key (401 or 403). It is not used
	// while any key is not failed.
	Failed State = "failed"
	// Unchecked: the key is not checked, because verify_keys is off or
	// the provider has no model list to check it with. It is used as a
	// pending key is.
	Unchecked State = "unchecked"
)

// Result is the outcome of a key's last check.
type Result struct {
	State State
	// Reason says why the check failed or could not tell; never the key,
	// nor the provider's message (which may quote part of it).
	Reason string
	At     time.Time
}

// KeyStatus describes one key of a ring, for logs, metrics and status,
// without the key.
type KeyStatus struct {
	// Index is the key's position in api_keys or its file, from 0.
	Index       int
	Fingerprint string
	Result
}

// Fingerprint names a key without revealing it: the first 12 hex digits
// of its SHA-256, which an operator computes with
// `printf %s "$KEY" | sha256sum | cut -c1-12`.
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// state is key's state. r.mu must be held.
func (r *Ring) state(key string) State {
	if res, ok := r.checks[key]; ok {
		return res.State
	}
	if r.verify {
		return Pending
	}
	return Unchecked
}

// wake tells the Verifier there is something to check. r.mu must be held.
func (r *Ring) wake() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Verifies reports whether the ring's keys are checked (verify_keys).
func (r *Ring) Verifies() bool { return r.verify }

// pending returns the keys whose check is due.
func (r *Ring) pending() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range r.keys {
		if r.state(k) == Pending {
			out = append(out, k)
		}
	}
	return out
}

// record keeps the result of a check of key, unless the key left the ring
// meanwhile or a call verified it, and returns the key's status with the
// state of its previous check ("" for none). ok is false when nothing was
// recorded.
func (r *Ring) record(key string, res Result) (st KeyStatus, before State, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.keys, key)
	before = r.checks[key].State
	if i < 0 || before == Verified && res.State != Verified {
		return KeyStatus{}, before, false
	}
	r.checks[key] = res
	return KeyStatus{Index: i, Fingerprint: Fingerprint(key), Result: res}, before, true
}

// Recheck forgets every check but the successful ones, so the keys the
// provider refused, or that could not be checked, are checked again: a
// key may have been activated since. The worker calls it on SIGHUP.
func (r *Ring) Recheck() {
	if !r.verify {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, res := range r.checks {
		if res.State != Verified {
			delete(r.checks, k)
		}
	}
	r.wake()
}

// Status describes every key of the ring, in order, without the keys.
func (r *Ring) Status() []KeyStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]KeyStatus, 0, len(r.keys))
	for i, k := range r.keys {
		res, ok := r.checks[k]
		if !ok {
			res.State = r.state(k)
		}
		out = append(out, KeyStatus{Index: i, Fingerprint: Fingerprint(k), Result: res})
	}
	return out
}
