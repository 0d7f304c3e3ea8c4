package worker

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/provider"
)

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

// keysWorker is a worker reduced to its keys, its logger and its metrics.
func keysWorker(t *testing.T, rings map[string]*apikeys.Ring) *Worker {
	t.Helper()
	m, err := metrics.NewWorker(nil, metrics.NewNames(slices.Collect(maps.Keys(rings)), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	return &Worker{keys: rings, logger: slog.New(slog.DiscardHandler), metrics: m}
}

func TestWatchKeysPicksUpAChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "k1")
	r, err := apikeys.NewRing(provider.Config{Name: "p", APIKeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	w := keysWorker(t, map[string]*apikeys.Ring{"p": r})
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
		if k := r.Key(); k != "k1" {
			t.Fatalf("Key() = %q before the first poll", k)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if k := r.Key(); k != "k2" {
			t.Fatalf("Key() = %q after a poll, want k2", k)
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
	rg, err := apikeys.NewRing(provider.Config{Name: "g", APIKeysFile: good})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := apikeys.NewRing(provider.Config{Name: "b", APIKeysFile: bad})
	if err != nil {
		t.Fatal(err)
	}
	inline, err := apikeys.NewRing(provider.Config{Name: "i", APIKeys: []string{"i1"}})
	if err != nil {
		t.Fatal(err)
	}
	w := keysWorker(t, map[string]*apikeys.Ring{"g": rg, "b": rb, "i": inline})
	writeKeys(t, good, "g2")
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	err = w.Reload()
	if err == nil || !strings.Contains(err.Error(), "provider b:") || strings.Contains(err.Error(), "provider g:") {
		t.Fatalf("Reload err = %v, want one naming provider b only", err)
	}
	if rg.Key() != "g2" || rb.Key() != "b1" || inline.Key() != "i1" {
		t.Fatalf("keys after Reload: %q %q %q; want g2 b1 i1", rg.Key(), rb.Key(), inline.Key())
	}
}
