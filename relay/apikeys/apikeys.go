// Package apikeys holds a provider's API keys as every role that calls the
// provider uses them: the worker for its requests, the coordinator for its
// probes. Sharing one Ring type keeps both on the same key after a refusal
// or a rotation, so a probe never judges a provider with a key the traffic
// no longer uses.
//
// A worker also verifies each key before it takes traffic (Verifier, with
// Check): a key the provider refuses is never used while another is not
// refused, and a key not yet verified waits while a verified one serves.
// A check that cannot tell (the provider down) leaves the key usable, so
// an outage of the provider never makes the relay refuse its own keys.
package apikeys

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/provider"
)

// Ring holds one provider's API keys, shared by all the calls of a process.
// A key the provider refuses is set aside, so later calls start with the
// next one; the keys of an api_keys_file are replaced by Reload, which its
// owner calls when the file may have changed. A call keeps the key it
// started with, so a rotation never disturbs a stream in flight. The
// results of the keys' checks (check.go) decide which key a call takes
// (Key).
type Ring struct {
	file   string // "" when the keys come from api_keys
	verify bool   // the keys are checked (verify_keys)
	// changed wakes the Verifier: keys were added, or a recheck asked.
	changed chan struct{}

	mu       sync.Mutex
	keys     []string
	rejected map[string]bool
	checks   map[string]Result // by key; none yet: Pending
	read     os.FileInfo       // of the file as last read; nil before
	lastErr  string            // of the last reload, "" after a good one
}

// NewRing returns the ring of provider p, with the keys of its
// api_keys_file read at once.
func NewRing(p provider.Config) (*Ring, error) {
	r := &Ring{file: p.APIKeysFile, verify: p.VerifiesKeys(), changed: make(chan struct{}, 1),
		keys: slices.Clone(p.APIKeys), rejected: map[string]bool{}, checks: map[string]Result{}}
	if r.file != "" {
		if _, err := r.Reload(true); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	return r, nil
}

// Key returns the key a new call uses: the first verified key not set
// aside, else the first one not set aside whose check did not fail. When
// every key was refused it returns the first whose check did not fail, as
// the refusals may be stale, and when every check failed, the first key:
// a check can be wrong (a key the provider has not activated yet, a key
// without the right to list models), and refusing every key would make
// the provider unusable for sure. "" when there are no keys.
func (r *Ring) Key() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.usable(); ok {
		return k
	}
	for _, k := range r.keys {
		if r.state(k) != Failed {
			return k
		}
	}
	if len(r.keys) > 0 {
		return r.keys[0]
	}
	return ""
}

// Reject sets key aside after the provider refused it (401/403) and
// returns the key to retry with: the next usable one or, when none is
// left, a key the file holds now (it is re-read at once). ok is false when
// there is no other key to try.
func (r *Ring) Reject(key string) (next string, ok bool) {
	r.mu.Lock()
	r.rejected[key] = true
	next, ok = r.usable()
	r.mu.Unlock()
	if ok || r.file == "" {
		return next, ok
	}
	if _, err := r.Reload(true); err != nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usable()
}

// Accept clears a refusal of key: a call with it succeeded, which also
// verifies it.
func (r *Ring) Accept(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rejected, key)
	if r.verify && slices.Contains(r.keys, key) && r.checks[key].State != Verified {
		r.checks[key] = Result{State: Verified, Reason: "a call succeeded", At: time.Now()}
	}
}

// usable returns the first verified key not set aside, else the first key
// not set aside whose check did not fail. r.mu must be held.
func (r *Ring) usable() (string, bool) {
	first := ""
	for _, k := range r.keys {
		if r.rejected[k] {
			continue
		}
		switch r.state(k) {
		case Verified:
			return k, true
		case Failed:
		default:
			if first == "" {
				first = k
			}
		}
	}
	return first, first != ""
}

// Reload re-reads the key file if it changed since it was last read, or in
// any case if force is set, and reports whether the keys changed. New keys
// come with a clean slate: refusals are forgotten, as a rotation may have
// fixed them; the keys that stay keep their checks, the new ones wait for
// theirs (the Verifier is woken). A file that cannot be read or holds no
// key leaves the keys as they were, so a half-written file cannot take
// them away (write it elsewhere and rename it over the old one).
func (r *Ring) Reload(force bool) (changed bool, err error) {
	fi, err := os.Stat(r.file)
	if err != nil {
		return false, fmt.Errorf("api_keys_file: %w", err)
	}
	r.mu.Lock()
	same := sameFile(r.read, fi)
	r.mu.Unlock()
	if same && !force {
		return false, nil
	}
	data, err := os.ReadFile(r.file)
	if err != nil {
		return false, fmt.Errorf("api_keys_file: %w", err)
	}
	keys := parseKeys(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Remember even a bad file, so that it is not read again every poll
	// until it changes.
	r.read = fi
	if len(keys) == 0 {
		return false, fmt.Errorf("api_keys_file %s: no key in it", r.file)
	}
	r.lastErr = ""
	if slices.Equal(keys, r.keys) {
		return false, nil
	}
	r.keys, r.rejected = keys, map[string]bool{}
	maps.DeleteFunc(r.checks, func(k string, _ Result) bool { return !slices.Contains(keys, k) })
	r.wake()
	return true, nil
}

// Failed records the error of a reload and reports whether it differs
// from the previous one, so that a lasting failure is logged once.
func (r *Ring) Failed(err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := err.Error() != r.lastErr
	r.lastErr = err.Error()
	return changed
}

// Count returns how many keys the ring holds, for logs (never the keys).
func (r *Ring) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

// File is the api_keys_file the keys come from, "" for api_keys.
func (r *Ring) File() string { return r.file }

// sameFile reports whether b is the file a was, unchanged as far as its
// metadata tells: the same inode (a rename over it makes another), size
// and modification time.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// parseKeys reads one key per line, skipping blank lines and # comments.
func parseKeys(data []byte) []string {
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys
}
