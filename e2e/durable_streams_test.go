package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// dsReport is the part of vitest's JSON report the test reads.
type dsReport struct {
	NumPassedTests  int `json:"numPassedTests"`
	NumFailedTests  int `json:"numFailedTests"`
	NumPendingTests int `json:"numPendingTests"`
	TestResults     []struct {
		Message          string `json:"message"`
		AssertionResults []struct {
			FullName        string   `json:"fullName"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// dsLongPoll is the edge's long-poll timeout in the suite's run, and what
// the suite is told: its long-poll tests wait for it.
const dsLongPoll = time.Second

// TestDurableStreamsConformance runs the public Durable Streams server
// conformance suite (the pinned @durable-streams/server-conformance-tests,
// through e2e/node/durable_streams.test.mjs) against `relay dev` started
// as a process, and fails on any test the suite fails, naming each. The
// suite's subscription tests are off by default; they are not served.
func TestDurableStreamsConformance(t *testing.T) {
	node := nodeBinary(t)
	suite := filepath.Join("node", "node_modules", "@durable-streams", "server-conformance-tests", "package.json")
	if _, err := os.Stat(suite); err != nil {
		t.Fatalf("the conformance suite is missing (%v): run e2e/setup.sh", err)
	}
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
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.CommandContext(ctx, node, filepath.Join("node_modules", "vitest", "vitest.mjs"), "run", "durable_streams.test.mjs",
		"--no-coverage", "--reporter=json", "--outputFile="+report)
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "DS_URL="+dev.URL+"/ds", "DS_LONG_POLL_TIMEOUT_MS="+strconv.FormatInt(dsLongPoll.Milliseconds(), 10))
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the suite wrote no report (%v; vitest: %v):\n%s", err, runErr, out)
	}
	var r dsReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("the suite's report: %v", err)
	}
	t.Logf("conformance suite: %d passed, %d failed, %d skipped in %v", r.NumPassedTests, r.NumFailedTests, r.NumPendingTests, took)
	for _, file := range r.TestResults {
		if file.Message != "" {
			t.Errorf("suite: %s", file.Message)
		}
		for _, a := range file.AssertionResults {
			if a.Status == "failed" {
				msg := strings.Join(a.FailureMessages, "\n")
				if len(msg) > 600 {
					msg = msg[:600] + "…"
				}
				t.Errorf("FAIL %s\n%s", a.FullName, msg)
			}
		}
	}
	if r.NumPassedTests == 0 || runErr != nil && r.NumFailedTests == 0 {
		t.Fatalf("the suite did not pass (vitest: %v):\n%s", runErr, out)
	}
}
