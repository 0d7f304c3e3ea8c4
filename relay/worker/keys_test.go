package worker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/provider"
)

func TestKeyringRejectTakesTheNextKey(t *testing.T) {
	r, err := newKeyring(provider.Config{Name: "p", APIKeys: []string{"k1", "k2", "k3"}})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.key(); k != "k1" {
		t.Fatalf("key() = %q, want k1", k)
	}
	for _, want := range []string{"k2", "k3"} {
		if next, ok := r.reject(r.key()); !ok || next != want {
			t.Fatalf("reject = %q, %v; want %s", next, ok, want)
		}
		if k := r.key(); k != want {
			t.Fatalf("key() after a refusal = %q, want %s", k, want)
		}
	}
	if next, ok := r.reject("k3"); ok {
		t.Fatalf("reject of the last key = %q, want none", next)
	}
	if k := r.key(); k != "k1" {
		t.Fatalf("key() with every key refused = %q, want the first", k)
	}
	r.accept("k2")
	if k := r.key(); k != "k2" {
		t.Fatalf("key() after k2 worked = %q, want k2", k)
	}
}

func TestKeyringWithoutKeys(t *testing.T) {
	r, err := newKeyring(provider.Config{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.key(); k != "" {
		t.Fatalf("key() = %q, want none", k)
	}
	if _, ok := r.reject(""); ok {
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

func TestKeyringFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "# rotated daily", "  k1  ", "", "k2")
	r, err := newKeyring(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if k := r.key(); k != "k1" || r.count() != 2 {
		t.Fatalf("key() = %q of %d keys, want k1 of 2", k, r.count())
	}
	if changed, err := r.reload(false); changed || err != nil {
		t.Fatalf("reload of an unchanged file = %v, %v", changed, err)
	}
	r.reject("k1")
	writeKeys(t, path, "k1", "k3")
	if changed, err := r.reload(false); !changed || err != nil {
		t.Fatalf("reload of a changed file = %v, %v", changed, err)
	}
	if k := r.key(); k != "k1" {
		t.Fatalf("key() after a rotation = %q: refusals must be forgotten", k)
	}
	// A half-written (here: empty) file keeps the keys.
	writeKeys(t, path, "# nothing yet")
	if changed, err := r.reload(false); changed || err == nil {
		t.Fatalf("reload of an empty file = %v, %v; want an error", changed, err)
	}
	if k := r.key(); k != "k1" || r.count() != 2 {
		t.Fatalf("keys lost to an empty file: key() = %q of %d", k, r.count())
	}
}

func TestKeyringRejectRereadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "old")
	r, err := newKeyring(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	// Rotated, and the provider refuses the old key before any poll.
	writeKeys(t, path, "new")
	if next, ok := r.reject("old"); !ok || next != "new" {
		t.Fatalf("reject = %q, %v; want the file's new key", next, ok)
	}
}

func TestKeyringFileMustHoldKeys(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeKeys(t, empty, "")
	for _, path := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := newKeyring(provider.Config{Name: "p", APIKeysFile: path}); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
}

func TestWatchKeysPicksUpAChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "k1")
	r, err := newKeyring(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{keys: map[string]*keyring{"p": r}, logger: slog.New(slog.DiscardHandler)}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.watchKeys(ctx, time.Second)
		}()
		writeKeys(t, path, "k2")
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if k := r.key(); k != "k1" {
			t.Fatalf("key() = %q before the first poll", k)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if k := r.key(); k != "k2" {
			t.Fatalf("key() = %q after a poll, want k2", k)
		}
		cancel()
		<-done
	})
}

func TestReloadRereadsEveryKeyFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	writeKeys(t, good, "g1")
	writeKeys(t, bad, "b1")
	rg, err := newKeyring(provider.Config{Name: "g", APIKeysFile: good})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := newKeyring(provider.Config{Name: "b", APIKeysFile: bad})
	if err != nil {
		t.Fatal(err)
	}
	inline, err := newKeyring(provider.Config{Name: "i", APIKeys: []string{"i1"}})
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{keys: map[string]*keyring{"g": rg, "b": rb, "i": inline}, logger: slog.New(slog.DiscardHandler)}
	writeKeys(t, good, "g2")
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	err = w.Reload()
	if err == nil || !strings.Contains(err.Error(), "provider b:") || strings.Contains(err.Error(), "provider g:") {
		t.Fatalf("Reload err = %v, want one naming provider b only", err)
	}
	if rg.key() != "g2" || rb.key() != "b1" || inline.key() != "i1" {
		t.Fatalf("keys after Reload: %q %q %q; want g2 b1 i1", rg.key(), rb.key(), inline.key())
	}
}
