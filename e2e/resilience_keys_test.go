package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// Credentials: a refused key is replaced by the next at once,
// without counting against the provider, and keys rotate without a
// restart while streams run.

func Test401OnFirstKeyUsesSecondKey(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 20, TokenInterval: -1, APIKeys: []string{"key-2"}},
		// A refusal at run time: key-1 is not checked first (that is
		// resilience_keycheck_test.go).
		Tune: withFastRetry(func(cfg *config.Config) {
			cfg.Providers[0].APIKeys = []string{"key-1", "key-2"}
			cfg.Providers[0].VerifyKeys = new(false)
		}),
	})
	const content = "Hello"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 20), 2)
	// Nothing was published before the key change: the answer starts with
	// the retry.
	expectSeams(t, a, "retry:mock/mock-1#2")
	expectVerdicts(t, sys.Gate, "mock/mock-1:neutral", "mock/mock-1:success")
	if n := sys.Gate.failures("mock"); n != 0 {
		t.Fatalf("%d failures reported for the provider, want none: the second key fixed it", n)
	}
	// The refused key stays aside: the next request goes to key-2 at once.
	ask(t, sys.Edge, "mock-1", "Hello again").expectDone(t, answerText("Hello again", 20), 1)
	if keys := callKeys(sys); !slices.Equal(keys, []string{"key-1", "key-2", "key-2"}) {
		t.Fatalf("keys sent %v, want key-1 (refused), then key-2 twice", keys)
	}
}

func TestKeyRotationWhileStreamsRun(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeKeyFile(t, keyFile, "old-key")
	const tokens = 200
	sys := start(t, options{
		Record: true,
		// 200 tokens at 10ms: the first streams run for 2s, through the
		// rotation.
		Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 10 * time.Millisecond, APIKeys: []string{"old-key"}},
		Tune: withFastRetry(func(cfg *config.Config) {
			cfg.Providers[0].APIKeys, cfg.Providers[0].APIKeysFile = nil, keyFile
			cfg.Worker.KeysPollInterval = 50 * time.Millisecond
		}),
	})

	// Three streams start on the old key.
	type result struct {
		content string
		a       *answer
		err     error
	}
	results := make(chan result, 3)
	for i := range 3 {
		content := "Stream " + string(rune('A'+i)) + " through the rotation."
		go func() {
			a, err := read(sys.Edge, "mock-1", content)
			results <- result{content, a, err}
		}()
	}
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool { return len(sys.fronts["mock"].allChats()) == 3 })

	// Rotation with overlap, as operators do it: the provider accepts
	// both keys, the key file gets the new one, and the worker picks it
	// up by itself.
	sys.Mock.SetAPIKeys([]string{"old-key", "new-key"})
	writeKeyFile(t, keyFile, "new-key")
	probe := 0
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		probe++
		// One token, so that a probe is short.
		a, err := readRequest(sys.Edge, map[string]any{
			"model": "mock-1", "stream": true, "max_tokens": 1,
			"messages": []mockupstream.Message{{Role: "user", Content: fmt.Sprintf("Probe %d", probe)}},
		})
		if err != nil || a.status != "done" {
			t.Fatalf("probe %d: %v, %+v", probe, err, a)
		}
		keys := callKeys(sys)
		return keys[len(keys)-1] == "new-key"
	})
	// Then the old key is revoked while the first streams still run on it.
	sys.Mock.SetAPIKeys([]string{"new-key"})
	select {
	case r := <-results:
		t.Fatalf("a stream ended before the old key was revoked (%+v): the test tests nothing", r)
	default:
	}
	short := func(content string) {
		t.Helper()
		a, err := readRequest(sys.Edge, map[string]any{
			"model": "mock-1", "stream": true, "max_tokens": 5,
			"messages": []mockupstream.Message{{Role: "user", Content: content}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if a.status != "done" || a.text != tokensText(content, tokens, 5) {
			t.Fatalf("%q: status %q, text %q", content, a.status, a.text)
		}
	}
	short("A stream after the rotation.")

	// A rotation without overlap, likely before the worker polls: the
	// first call is refused, the file re-read at once, and the call
	// retried on the new key.
	writeKeyFile(t, keyFile, "newest-key")
	sys.Mock.SetAPIKeys([]string{"newest-key"})
	short("A stream after a hard rotation.")
	if keys := callKeys(sys); keys[len(keys)-1] != "newest-key" {
		t.Fatalf("keys sent %v, want the newest key last", keys)
	}

	for range 3 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		// In flight on the old key, never interrupted.
		r.a.expectDone(t, answerText(r.content, tokens), 1)
	}
	keys := callKeys(sys)
	if !slices.Equal(keys[:3], []string{"old-key", "old-key", "old-key"}) {
		t.Fatalf("the first streams were sent with %v, want the old key", keys[:3])
	}
	if n := sys.Gate.failures("mock"); n != 0 {
		t.Fatalf("%d failures reported for the provider, want none: rotations are not outages", n)
	}
	t.Logf("%d probes until the worker used the new key; keys sent: %v", probe, keys)
}

// Reload is what the relay binary runs on SIGHUP.
func TestKeyFileReloadedOnSIGHUP(t *testing.T) {
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeKeyFile(t, keyFile, "old-key")
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 10, TokenInterval: -1, APIKeys: []string{"old-key", "new-key"}},
		Tune: withFastRetry(func(cfg *config.Config) {
			cfg.Providers[0].APIKeys, cfg.Providers[0].APIKeysFile = nil, keyFile
			cfg.Worker.KeysPollInterval = -1
		}),
	})
	ask(t, sys.Edge, "mock-1", "before").expectDone(t, answerText("before", 10), 1)
	writeKeyFile(t, keyFile, "new-key")
	if err := sys.Relay.Reload(); err != nil {
		t.Fatal(err)
	}
	ask(t, sys.Edge, "mock-1", "after").expectDone(t, answerText("after", 10), 1)
	if keys := callKeys(sys); !slices.Equal(keys, []string{"old-key", "new-key"}) {
		t.Fatalf("keys sent %v, want the old key, then after Reload the new one", keys)
	}
}

// writeKeyFile replaces the key file by renaming a new one over it, the
// way to rotate it safely.
func writeKeyFile(t *testing.T, path, key string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("# rotated by the test\n"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// callKeys returns the key of every upstream call, in order.
func callKeys(sys *system) []string {
	var keys []string
	for _, c := range sys.fronts["mock"].allChats() {
		keys = append(keys, c.key)
	}
	return keys
}
