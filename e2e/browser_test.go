package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// chromiumPath is Debian's Chromium, which e2e/setup.sh installs.
const chromiumPath = "/usr/bin/chromium"

// artifacts is where browser tests write their screenshots (gitignored).
const artifacts = "artifacts"

// The demo's fake model: 60 tokens, 40 ms apart, so an answer streams for
// about 2.4 s and can be cut three times.
const (
	demoTokens   = 60
	demoInterval = 40 * time.Millisecond
)

// browser starts a headless Chromium for the test, with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing: run e2e/setup.sh (it installs Debian's chromium)", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot writes the page to artifacts/name.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifacts, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: e2e/%s", path)
}

// poll waits until the JavaScript expression is truthy and returns it.
func poll[T any](t *testing.T, ctx context.Context, what, expr string, wait time.Duration) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(wait)))
	if err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.relayDemo || null)`))
		t.Fatalf("%s: %v (demo state %s)", what, err, state)
	}
	return v
}

// TestBrowser drives Debian's Chromium against a running relay (edge with
// the demo on, worker, coordinator): the demo chat completes an answer
// while the connection is dropped three times, and the dashboard renders
// the provider health board and its charts with the data that produced.
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	sys := start(t, options{
		Coordinator: true,
		Mock:        mockupstream.Config{Tokens: demoTokens, TokenInterval: demoInterval},
		Tune: withOpsModels(func(c *config.Config) {
			c.Edge.Demo = true
			c.Edge.RetryHint = 200 * time.Millisecond
			c.Coordinator = coordinator.Config{Listen: c.Coordinator.Listen, HealthInterval: time.Second}
		}),
	})

	t.Run("demo survives three drops", func(t *testing.T) {
		const question = "Browser test: three drops, one answer."
		_, want := prompt(question, demoTokens)
		must(t, chromedp.Do(ctx,
			chromedp.Navigate(sys.Edge+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#send`)),
		))
		poll[bool](t, ctx, "models listed", `document.querySelectorAll("#model option").length > 0`, 10*time.Second)
		must(t, chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#prompt`), question),
			chromedp.Click(chromedp.CSS(`#send`)),
		))
		for i, atSeq := range []int{6, 22, 38} {
			poll[bool](t, ctx, fmt.Sprintf("drop %d: streaming at seq %d", i+1, atSeq),
				fmt.Sprintf(`relayDemo.status === "streaming" && relayDemo.reconnects === %d && relayDemo.seq >= %d`, i, atSeq), 15*time.Second)
			must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#drop`))))
			poll[bool](t, ctx, fmt.Sprintf("reconnect %d", i+1), fmt.Sprintf(`relayDemo.reconnects === %d`, i+1), 15*time.Second)
		}
		poll[bool](t, ctx, "answer done", `relayDemo.status === "done" || relayDemo.status === "error"`, 30*time.Second)
		got := poll[string](t, ctx, "answer text", `relayDemo.status === "done" && relayDemo.text`, time.Second)
		if got != want {
			t.Fatalf("the page shows %q, want the fake upstream's %q", got, want)
		}
		drops := poll[float64](t, ctx, "drops", `relayDemo.drops`, time.Second)
		seq := poll[float64](t, ctx, "seq", `relayDemo.seq`, time.Second)
		if drops != 3 || seq < demoTokens/2 {
			t.Fatalf("drops %v, last seq %v", drops, seq)
		}
		// The cursor is on the page for people to see.
		shown := poll[string](t, ctx, "cursor shown", `document.getElementById("st-cursor").textContent`, time.Second)
		if shown == "–" {
			t.Fatalf("no cursor shown")
		}
		screenshot(t, ctx, "demo.png")
	})

	t.Run("dashboard", func(t *testing.T) {
		// Streams started with POST have a time to first token.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { _, errs[i] = read(sys.Edge, "mock-1", fmt.Sprintf("dashboard stream %d", i)) })
		}
		wg.Wait()
		for _, err := range errs {
			must(t, err)
		}
		must(t, chromedp.Do(ctx, chromedp.Navigate(sys.Edge+"/dashboard")))
		poll[bool](t, ctx, "health board: mock is green",
			`document.querySelector('#health .provider[data-name="mock"][data-state="green"]') !== null`, 15*time.Second)
		poll[bool](t, ctx, "throughput chart has data",
			`Number(document.getElementById("chart-throughput").dataset.total) > 0 && document.querySelector("#chart-throughput path.line") !== null`, 10*time.Second)
		poll[bool](t, ctx, "TTFT chart has data",
			`Number(document.getElementById("chart-ttft").dataset.count) > 0 && document.querySelector("#chart-ttft circle.pt") !== null`, 10*time.Second)
		poll[bool](t, ctx, "cost chart has mock-1",
			`document.querySelector('#chart-cost rect.bar[data-model="mock-1"]') !== null`, 10*time.Second)
		poll[bool](t, ctx, "one worker", `document.getElementById("worker-count").textContent === "1"`, 10*time.Second)
		screenshot(t, ctx, "dashboard.png")
	})
}
