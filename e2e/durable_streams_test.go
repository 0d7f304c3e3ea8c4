package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// TestDurableStreamsConformance runs the public Durable Streams server
// conformance suite (runDSSuite) against `relay dev` started as a
// process, and fails on any test the suite fails, naming each. The
// suite's subscription tests are off by default; they are not served.
func TestDurableStreamsConformance(t *testing.T) {
	bin := processBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := procs.New(ctx, procs.Options{Dir: t.TempDir(), Binaries: bin, Logf: t.Logf, StopTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Logf("closing the processes: %v", err)
		}
	})
	dev, err := h.Start(ctx, procs.Role{Role: procs.Dev, Settings: procs.Settings{
		"edge.demo":                              false,
		"edge.durable_streams.long_poll_timeout": dsLongPoll.String(),
		// The suite checks a browser's preflight of a conditional GET.
		"edge.cors_allowed_origins": []string{"*"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := runDSSuite(t, ctx, dev.URL+"/ds", nil)
	t.Logf("conformance suite: %d passed, %d failed, %d skipped in %v",
		res.Passed, res.Failed, res.Skipped, time.Since(start).Round(time.Millisecond))
	for _, fail := range res.Failures {
		t.Errorf("failed: %s", fail)
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", res.Output)
	}
	if res.Passed == 0 {
		t.Fatalf("no test of the suite passed:\n%s", res.Output)
	}
}
