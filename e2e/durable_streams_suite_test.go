package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The public Durable Streams server conformance suite, pinned in
// e2e/node (@durable-streams/server-conformance-tests), runs under vitest
// from node/durable_streams.test.mjs against DS_URL, through runDSSuite
// (TestDurableStreamsConformance, the cluster's suite). The suite's own CLI is not used: it looks
// vitest up next to its real path, which a node_modules reached through a
// link does not have.

// dsSuiteFile is the vitest file, relative to e2e/node.
const dsSuiteFile = "durable_streams.test.mjs"

// dsLongPoll is the edge's long-poll timeout in the suite's runs, and what
// the suite is told: its long-poll tests wait for it.
const dsLongPoll = time.Second

// dsReport is the part of vitest's JSON report the runner reads.
type dsReport struct {
	TestResults []struct {
		Message          string `json:"message"`
		AssertionResults []struct {
			FullName        string   `json:"fullName"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// dsSuiteResult is what one run of the suite reported.
type dsSuiteResult struct {
	Passed, Failed, Skipped int
	// Failures name each failed test and its first message.
	Failures []string
	// Output is the suite's whole console output, for the test log.
	Output string
}

// dsSuiteTotal is the number of tests the suite will run (vitest list),
// so that a caller can act once a share of them has passed.
func dsSuiteTotal(t *testing.T, ctx context.Context, baseURL string) int {
	t.Helper()
	cmd := dsVitest(t, ctx, baseURL, "list", dsSuiteFile, "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vitest list: %v\n%s", err, stderrOf(err))
	}
	var tests []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(out, &tests); err != nil {
		t.Fatalf("vitest list: %v in %q", err, out)
	}
	if len(tests) == 0 {
		t.Fatal("vitest list: the suite holds no tests")
	}
	return len(tests)
}

// runDSSuite runs the suite against baseURL (the URL below which it
// creates its streams) and returns what it reported; passed, if not nil,
// is called with the count of passed tests each time one passes, from the
// goroutine reading the suite's output.
func runDSSuite(t *testing.T, ctx context.Context, baseURL string, passed func(n int)) dsSuiteResult {
	t.Helper()
	report := filepath.Join(t.TempDir(), "vitest.json")
	cmd := dsVitest(t, ctx, baseURL, "run", dsSuiteFile, "--no-coverage",
		"--reporter=verbose", "--reporter=json", "--outputFile.json="+report)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start vitest: %v", err)
	}
	var output strings.Builder
	var wg sync.WaitGroup
	started := time.Now()
	wg.Go(func() {
		n := 0
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			// Each line with the time it came, to tell which tests ran
			// beside what.
			fmt.Fprintf(&output, "[%6.2fs] %s\n", time.Since(started).Seconds(), line)
			// The verbose reporter prints " ✓ file > group > test 12ms"
			// as each test passes.
			if strings.HasPrefix(strings.TrimSpace(line), "✓ ") {
				n++
				if passed != nil {
					passed(n)
				}
			}
		}
		io.Copy(io.Discard, stdout)
	})
	wg.Wait()
	runErr := cmd.Wait()
	res := dsSuiteResult{Output: output.String() + stderr.String()}
	if err := res.readReport(report); err != nil {
		t.Fatalf("the suite left no report (%v): %v\n%s", runErr, err, res.Output)
	}
	if runErr != nil && res.Failed == 0 {
		t.Fatalf("vitest: %v with no failed test\n%s", runErr, res.Output)
	}
	return res
}

// readReport fills r from vitest's JSON report.
func (r *dsSuiteResult) readReport(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep dsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	for _, file := range rep.TestResults {
		if file.Message != "" && len(file.AssertionResults) == 0 {
			r.Failed++
			r.Failures = append(r.Failures, "the suite's file: "+file.Message)
		}
		for _, a := range file.AssertionResults {
			switch a.Status {
			case "passed":
				r.Passed++
			case "failed":
				r.Failed++
				msg := ""
				if len(a.FailureMessages) > 0 {
					msg, _, _ = strings.Cut(a.FailureMessages[0], "\n")
				}
				r.Failures = append(r.Failures, fmt.Sprintf("%s: %s", a.FullName, msg))
			default: // skipped, pending, todo: the suite's own skips
				r.Skipped++
			}
		}
	}
	return nil
}

// dsVitest is a vitest command in e2e/node against baseURL.
func dsVitest(t *testing.T, ctx context.Context, baseURL string, args ...string) *exec.Cmd {
	t.Helper()
	node := nodeBinary(t)
	for _, pkg := range []string{"vitest", "@durable-streams/server-conformance-tests"} {
		if _, err := os.Stat(filepath.Join("node", "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("the npm package %s is missing: run e2e/setup.sh (it runs npm ci in e2e/node)", pkg)
		}
	}
	cmd := exec.CommandContext(ctx, node, append([]string{"node_modules/vitest/vitest.mjs"}, args...)...)
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "DS_URL="+baseURL, "DS_LONG_POLL_TIMEOUT_MS="+strconv.FormatInt(dsLongPoll.Milliseconds(), 10), "NO_COLOR=1", "CI=1")
	return cmd
}

// stderrOf is the standard error an exec.ExitError captured.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
