package apikeys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/provider"
)

func TestRingRejectTakesTheNextKey(t *testing.T) {
	r, err := NewRing(provider.Config{Name: "p", APIKeys: []string{"k1", "k2", "k3"}})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.Key(); k != "k1" {
		t.Fatalf("Key() = %q, want k1", k)
	}
	for _, want := range []string{"k2", "k3"} {
		if next, ok := r.Reject(r.Key()); !ok || next != want {
			t.Fatalf("reject = %q, %v; want %s", next, ok, want)
		}
		if k := r.Key(); k != want {
			t.Fatalf("Key() after a refusal = %q, want %s", k, want)
		}
	}
	if next, ok := r.Reject("k3"); ok {
		t.Fatalf("reject of the last key = %q, want none", next)
	}
	if k := r.Key(); k != "k1" {
		t.Fatalf("Key() with every key refused = %q, want the first", k)
	}
	r.Accept("k2")
	if k := r.Key(); k != "k2" {
		t.Fatalf("Key() after k2 worked = %q, want k2", k)
	}
}

func TestRingWithoutKeys(t *testing.T) {
	r, err := NewRing(provider.Config{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.Key(); k != "" {
		t.Fatalf("Key() = %q, want none", k)
	}
	if _, ok := r.Reject(""); ok {
		t.Fatal("reject offered a key out of nothing")
	}
}

// writeKeys replaces the key file the safe way, by renaming a new file
// over it.
func writeKeys(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestRingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "# rotated daily", "  k1  ", "", "k2")
	r, err := NewRing(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.Key(); k != "k1" || r.Count() != 2 {
		t.Fatalf("Key() = %q of %d keys, want k1 of 2", k, r.Count())
	}
	if changed, err := r.Reload(false); changed || err != nil {
		t.Fatalf("reload of an unchanged file = %v, %v", changed, err)
	}
	r.Reject("k1")
	writeKeys(t, path, "k1", "k3")
	if changed, err := r.Reload(false); !changed || err != nil {
		t.Fatalf("reload of a changed file = %v, %v", changed, err)
	}
	if k := r.Key(); k != "k1" {
		t.Fatalf("Key() after a rotation = %q: refusals must be forgotten", k)
	}
	// A half-written (here: empty) file keeps the keys.
	writeKeys(t, path, "# nothing yet")
	if changed, err := r.Reload(false); changed || err == nil {
		t.Fatalf("reload of an empty file = %v, %v; want an error", changed, err)
	}
	if k := r.Key(); k != "k1" || r.Count() != 2 {
		t.Fatalf("keys lost to an empty file: Key() = %q of %d", k, r.Count())
	}
}

func TestRingRejectRereadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "old")
	r, err := NewRing(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	// Rotated, and the provider refuses the old key before any poll.
	writeKeys(t, path, "new")
	if next, ok := r.Reject("old"); !ok || next != "new" {
		t.Fatalf("reject = %q, %v; want the file's new key", next, ok)
	}
}

func TestRingFileMustHoldKeys(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeKeys(t, empty, "")
	for _, path := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := NewRing(provider.Config{Name: "p", APIKeysFile: path}); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
}
