// Package apikeys holds a provider's API keys as every role that calls the
// provider uses them: the worker for its requests, the coordinator for its
// probes. Sharing one Ring type keeps both on the same key after a refusal
// or a rotation, so a probe never judges a provider with a key the traffic
// no longer uses.
package apikeys

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/relaydev/relay/relay/provider"
)

// Ring holds one provider's API keys, shared by all the calls of a process.
// A key the provider refuses is set aside, so later calls start with the
// next one; the keys of an api_keys_file are replaced by Reload, which its
// owner calls when the file may have changed. A call keeps the key it
// started with, so a rotation never disturbs a stream in flight.
type Ring struct {
	file string // "" when the keys come from api_keys

	mu       sync.Mutex
	keys     []string
	rejected map[string]bool
	read     os.FileInfo // of the file as last read; nil before
	lastErr  string      // of the last reload, "" after a good one
}

// NewRing returns the ring of provider p, with the keys of its
// api_keys_file read at once.
func NewRing(p provider.Config) (*Ring, error) {
	r := &Ring{file: p.APIKeysFile, keys: slices.Clone(p.APIKeys), rejected: map[string]bool{}}
	if r.file != "" {
		if _, err := r.Reload(true); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
	}
	return r, nil
}

// Key returns the key a new call uses: the first one not set aside. When
// every key was refused it returns the first anyway, as the refusals may be
// stale and there is nothing better; "" when there are no keys.
func (r *Ring) Key() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.usable(); ok {
		return k
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

// Accept clears a refusal of key: a call with it succeeded.
func (r *Ring) Accept(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rejected, key)
}

// usable returns the first key not set aside. r.mu must be held.
func (r *Ring) usable() (string, bool) {
	for _, k := range r.keys {
		if !r.rejected[k] {
			return k, true
		}
	}
	return "", false
}

// Reload re-reads the key file if it changed since it was last read, or in
// any case if force is set, and reports whether the keys changed. New keys
// come with a clean slate: refusals are forgotten, as a rotation may have
// fixed them. A file that cannot be read or holds no key leaves the keys
// as they were, so a half-written file cannot take them away (write it
// elsewhere and rename it over the old one).
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
