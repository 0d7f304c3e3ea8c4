package e2e

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// Safe key rotation: a key added to a running worker's api_keys_file is
// checked before it takes traffic. One the provider refuses is reported
// (status, metrics) and never used, while the requests go on on the good
// key and all complete.
func TestABadKeyAddedNextToAGoodOneIsReportedAndNeverUsed(t *testing.T) {
	t.Parallel()
	const (
		good, bad = "good-key", "bad-key"
		tokens    = 5
	)
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeKeyFile(t, keyFile, good)
	sys := start(t, options{
		Mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1, APIKeys: []string{good}},
		Tune: withFastRetry(func(cfg *config.Config) {
			cfg.Providers[0].APIKeys, cfg.Providers[0].APIKeysFile = nil, keyFile
			cfg.Worker.KeysPollInterval = 20 * time.Millisecond
		}),
	})
	ask(t, sys.Edge, "mock-1", "before").expectDone(t, answerText("before", tokens), 1)

	// Clients keep asking through the change.
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered int
		failures []string
	)
	for c := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				content := fmt.Sprintf("client %d asks %d", c, i)
				a, err := read(sys.Edge, "mock-1", content)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %v", content, err))
				case a.status != "done" || a.text != answerText(content, tokens):
					failures = append(failures, fmt.Sprintf("%s: status %q, text %q", content, a.status, a.text))
				default:
					answered++
				}
				mu.Unlock()
			}
		})
	}

	// The bad key comes first in the file: order alone would pick it.
	writeKeyFile(t, keyFile, bad+"\n"+good)
	var row fleet.KeyStatus
	relaytest.Eventually(t, 15*time.Second, 20*time.Millisecond, func() bool {
		for _, k := range relayStatus(t, t.Context(), sys.Edge).Keys {
			if k.Provider == "mock" && k.Fingerprint == apikeys.Fingerprint(bad) {
				row = k
				return k.State == "failed"
			}
		}
		return false
	})
	if row.Index != 0 || row.Reason != "refused: HTTP 401 Unauthorized" || row.Workers != 1 {
		t.Fatalf("status of the bad key %+v, want key #0 refused with a 401 by the one worker", row)
	}
	// Requests keep going after it was reported.
	mu.Lock()
	after := answered
	mu.Unlock()
	relaytest.Eventually(t, 15*time.Second, 10*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answered >= after+6
	})
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests did not complete: %v", len(failures), failures)
	}

	st := sys.Mock.Stats()
	if n := st.ByKey[bad]; n != 0 {
		t.Fatalf("%d requests reached the provider with the bad key", n)
	}
	if n := st.ByKey[good]; n != answered+1 {
		t.Fatalf("%d requests with the good key, want %d (every request)", n, answered+1)
	}
	if st.ModelsByKey[bad] == 0 {
		t.Fatal("the bad key was never checked")
	}
	mfs := scrape(t, sys.Worker)
	if v, _ := sample(mfs, "relay_api_keys", "provider", "mock", "state", "failed"); v != 1 {
		t.Errorf("relay_api_keys{state=failed} = %v, want 1", v)
	}
	if v, _ := sample(mfs, "relay_api_keys", "provider", "mock", "state", "verified"); v != 1 {
		t.Errorf("relay_api_keys{state=verified} = %v, want 1", v)
	}
	if v, _ := sample(mfs, "relay_api_key_checks_total", "provider", "mock", "result", "failed"); v != 1 {
		t.Errorf("relay_api_key_checks_total{result=failed} = %v, want 1", v)
	}
	t.Logf("%d requests answered around the bad key, all on the good one", answered+1)
}
