package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relaydev/relay/relay/mockupstream"
)

// The chat page's fake model: 100 tokens, 40 ms apart, so an answer
// streams for 4 s, long enough to reload the page or stop it mid-answer.
const (
	chatTokens   = 100
	chatInterval = 40 * time.Millisecond
)

// chatPage bundles the useChat page (web/chat) with esbuild from the
// pinned npm packages and serves it, with the edge behind the same origin
// (/v1/ is proxied to it), as an app serves its page and its API. It
// returns the page's base URL.
func chatPage(t *testing.T, edge string) string {
	t.Helper()
	dir := t.TempDir()
	esbuild := filepath.Join("node", "node_modules", ".bin", "esbuild")
	modules, err := filepath.Abs(filepath.Join("node", "node_modules"))
	must(t, err)
	cmd := exec.Command(esbuild, filepath.Join("web", "chat", "app.jsx"), "--bundle", "--format=esm", "--jsx=automatic",
		`--define:process.env.NODE_ENV="production"`, "--log-level=warning", "--outfile="+filepath.Join(dir, "app.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, out)
	}
	html, err := os.ReadFile(filepath.Join("web", "chat", "index.html"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "index.html"), html, 0o644))
	target, err := url.Parse(edge)
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/", httputil.NewSingleHostReverseProxy(target))
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// chatCall is the fake upstream's call for the conversation that starts
// with question, once there is exactly one.
func (s *system) chatCall(t *testing.T, question string) upstreamCall {
	t.Helper()
	calls := s.chatsFor(question)
	if len(calls) != 1 {
		t.Fatalf("the fake upstream was called %d times for %q; want 1", len(calls), question)
	}
	return calls[0]
}

// TestChatsBrowser drives Chromium on a page that uses the AI SDK's real
// useChat hook with resume against the relay: a page reloaded mid-answer
// shows the whole answer exactly once, from the one generation, which
// the reload (a disconnect) left running; the stop button stops the
// generation: the stream ends cancelled and the upstream call closes.
func TestChatsBrowser(t *testing.T) {
	ctx := browser(t)
	sys := start(t, options{Mock: mockupstream.Config{Tokens: chatTokens, TokenInterval: chatInterval}})
	page := chatPage(t, sys.Edge)

	submit := func(t *testing.T, chat, question string) {
		t.Helper()
		must(t, chromedp.Do(ctx,
			chromedp.Navigate(page+"/?chat="+chat),
			chromedp.WaitVisible(chromedp.CSS(`#send`)),
			chromedp.SendKeys(chromedp.CSS(`#prompt`), question),
			chromedp.Click(chromedp.CSS(`#send`)),
		))
	}
	const streaming = `chatState.status === "streaming" && chatState.messages.length === 2 && chatState.messages[1].text.length > 40`

	t.Run("reload mid-answer", func(t *testing.T) {
		const question = "Browser chat: reload mid-answer."
		_, want := prompt(question, chatTokens)
		submit(t, "reload-1", question)
		partial := poll[string](t, ctx, "part of the answer", streaming+` && chatState.messages[1].text`, 15*time.Second)
		started := poll[string](t, ctx, "stream id", `relayStreamIds[0]`, time.Second)
		if !strings.HasPrefix(want, partial) || len(partial) >= len(want) {
			t.Fatalf("before the reload the page shows %q, not a part of %q", partial, want)
		}
		must(t, chromedp.Do(ctx, chromedp.Reload()))
		reloaded := time.Now()
		wantJS, err := json.Marshal(want)
		must(t, err)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.chatState && chatState.status === "ready" && chatState.messages.some(m => m.role === "assistant" && m.text.length >= `+string(wantJS)+`.length)`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.chatState || null)`))
			t.Fatalf("the whole answer after the reload: %v (page state %s)", err, state)
		}
		shown := poll[string](t, ctx, "the page's messages", `document.getElementById("messages").textContent`, time.Second)
		assistants := poll[float64](t, ctx, "assistant messages", `chatState.messages.filter(m => m.role === "assistant").length`, time.Second)
		if shown != want || assistants != 1 {
			t.Fatalf("after the reload the page shows %q in %v assistant messages; want %q once", shown, assistants, want)
		}
		if resumed := poll[string](t, ctx, "resumed stream id", `relayStreamIds[0]`, time.Second); resumed != started {
			t.Fatalf("the reloaded page was served stream %s; the answer is %s", resumed, started)
		}
		call := sys.chatCall(t, question)
		if !call.ended.After(reloaded) {
			t.Fatalf("the upstream call ended at %v, before the reload at %v: the reload was not mid-answer", call.ended, reloaded)
		}
		screenshot(t, ctx, "chat-reloaded.png")
	})

	t.Run("stop", func(t *testing.T) {
		const question = "Browser chat: stop mid-answer."
		_, want := prompt(question, chatTokens)
		submit(t, "stop-1", question)
		poll[bool](t, ctx, "part of the answer", streaming, 15*time.Second)
		id := poll[string](t, ctx, "stream id", `relayStreamIds[0]`, time.Second)
		must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#stop`))))
		stopped := time.Now()
		poll[bool](t, ctx, "ready after stop", `chatState.status === "ready"`, 10*time.Second)

		var call upstreamCall
		waitFor(t, 5*time.Second, "the upstream call closed", func() bool {
			call = sys.chatCall(t, question)
			return !call.ended.IsZero()
		})
		if full := call.at.Add(chatTokens * chatInterval); !call.ended.Before(full) || call.ended.Sub(stopped) > 2*time.Second {
			t.Fatalf("the upstream call ended %v after the stop (the whole answer would end at %v)", call.ended.Sub(stopped), full)
		}
		res, err := http.Get(sys.Edge + "/v1/streams/" + id)
		must(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		must(t, err)
		if !strings.Contains(string(body), `"status":"cancelled"`) {
			t.Fatalf("stream %s did not end cancelled:\n%s", id, body)
		}
		res, err = http.Get(sys.Edge + "/v1/chats/stop-1/stream")
		must(t, err)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("after the stop GET /v1/chats/stop-1/stream is %d; want 204", res.StatusCode)
		}
		shown := poll[string](t, ctx, "the page's answer", `chatState.messages[1].text`, time.Second)
		if !strings.HasPrefix(want, shown) || len(shown) >= len(want) {
			t.Fatalf("after the stop the page shows %q, not a part of %q", shown, want)
		}
	})
}
