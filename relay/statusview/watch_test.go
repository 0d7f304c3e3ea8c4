package statusview

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// lockedBuffer is a bytes.Buffer the watcher's goroutine writes and the
// test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scriptedReads answers the watcher's reads in turn, the last one again
// and again.
func scriptedReads(answers ...func() (fleet.Status, error)) func(context.Context) (fleet.Status, error) {
	var mu sync.Mutex
	n := 0
	return func(context.Context) (fleet.Status, error) {
		mu.Lock()
		defer mu.Unlock()
		a := answers[min(n, len(answers)-1)]
		n++
		return a()
	}
}

func openBreaker() (fleet.Status, error) {
	return fleet.Status{
		Health:   []wire.Health{{Provider: "mock", State: wire.HealthRed}},
		Breakers: []fleet.BreakerStatus{{Provider: "mock", State: breaker.State{Phase: breaker.Open}}},
	}, nil
}

func closedBreaker() (fleet.Status, error) {
	return fleet.Status{Health: []wire.Health{{Provider: "mock", State: wire.HealthGreen}}}, nil
}

// On a terminal the watch draws every view over the previous one (cursor
// home, each line cleared to its end, the rest of the screen cleared) with
// the cursor hidden; a failed read is said in red (without the URL the
// title names) above the last status read, and the reads go on; when the watch is stopped, the terminal is
// restored (cursor shown, wrapping on) and the watch succeeds.
func TestStatusWatchRedrawsInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		w := &watcher{
			read: scriptedReads(closedBreaker, func() (fleet.Status, error) {
				return fleet.Status{}, &url.Error{Op: "Get", URL: "http://edge/v1/relay/status", Err: errors.New("connection refused")}
			}, openBreaker),
			edge: "http://edge", out: &out, color: true, interval: 2 * time.Second, now: time.Now,
			screen: &screen{out: &out, rows: func() int { return 40 }},
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- w.run(ctx) }()
		var views []string
		last := 0
		for range 3 {
			synctest.Wait()
			s := out.String()
			views = append(views, s[last:])
			last = len(s)
			time.Sleep(w.interval)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("stopped watch: %v", err)
		}
		all := out.String()

		if !strings.HasPrefix(views[0], hideCursor+noWrap+cursorHome+clearScreen) {
			t.Errorf("the watch does not begin by hiding the cursor and clearing the screen: %q", views[0][:min(40, len(views[0]))])
		}
		if n := strings.Count(all, clearScreen); n != 1 {
			t.Errorf("the screen was cleared %d times, want once (views are drawn over each other)", n)
		}
		for i, v := range views {
			v = strings.TrimPrefix(v, hideCursor+noWrap+cursorHome+clearScreen)
			if !strings.HasPrefix(v, cursorHome) || !strings.HasSuffix(v, clearLine+"\r\n"+clearBelow) {
				t.Errorf("view %d is not drawn from the top left and cleared below: %q", i, v)
			}
			if strings.Count(v, "\n") != strings.Count(v, clearLine+"\r\n") {
				t.Errorf("view %d has lines that do not clear the rest of the old line: %q", i, v)
			}
		}
		if !strings.Contains(views[0], "mock      "+green+"green") {
			t.Errorf("first view: no green provider: %q", views[0])
		}
		if !strings.Contains(views[1], red+"cannot read the status since 00:00:02 (retrying every 2s): connection refused") ||
			!strings.Contains(views[1], "below: the status as read at 00:00:00") || !strings.Contains(views[1], "mock      "+green+"green") {
			t.Errorf("second view: no red read error above the last status: %q", views[1])
		}
		if strings.Contains(views[2], "cannot read") || !strings.Contains(views[2], "mock      "+red+"red") {
			t.Errorf("third view: not the new status, or the old error: %q", views[2])
		}
		if !strings.HasSuffix(all, "\r"+clearLine+reset+wrap+showCursor) {
			t.Errorf("the terminal is not restored at the end: %q", all[max(0, len(all)-40):])
		}
	})
}

// Not on a terminal (or with --no-color) the views follow each other, with
// no colour and no control code at all.
func TestStatusWatchWithoutTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		w := &watcher{read: scriptedReads(closedBreaker, openBreaker), edge: "http://edge", out: &out, interval: time.Second, now: time.Now}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- w.run(ctx) }()
		synctest.Wait()
		time.Sleep(w.interval)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if strings.Contains(got, "\x1b") {
			t.Errorf("control codes in the output of a watch to no terminal: %q", got)
		}
		views := strings.Split(got, "relay status http://edge")[1:]
		if len(views) != 2 || !strings.Contains(views[0], "mock      green") || !strings.Contains(views[1], "mock      red    health red, breaker open") {
			t.Errorf("%d views, want 2 (green then red) one after the other:\n%s", len(views), got)
		}
	})
}

// A view taller than the terminal is cut to its height less one row, so
// that drawing it never scrolls; the last row says how much is missing.
func TestStatusScreenCutsTallViews(t *testing.T) {
	var out bytes.Buffer
	s := &screen{out: &out, rows: func() int { return 5 }}
	if err := s.draw([]byte("1\n2\n3\n4\n5\n6\n7\n")); err != nil {
		t.Fatal(err)
	}
	want := cursorHome + "1" + clearLine + "\r\n2" + clearLine + "\r\n3" + clearLine + "\r\n… 4 more lines: enlarge the terminal" + clearLine + "\r\n" + clearBelow
	if got := out.String(); got != want {
		t.Errorf("drew %q\nwant %q", got, want)
	}
}
