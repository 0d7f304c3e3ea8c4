package e2e

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// `relay status --watch` in a real terminal (tmux) against a running
// relay: the view shows the provider green, turns it red in place when its
// breaker opens (no view piles up above another), and Ctrl-C ends the
// watch with status 0, the last view left on the screen, the cursor shown
// at the start of the row below it.
func TestStatusWatchInATerminal(t *testing.T) {
	m := newTmux(t)
	relay := processBinaries(t).Relay
	sys := start(t, options{Coordinator: true, Mock: mockupstream.Config{Tokens: 12, TokenInterval: 5 * time.Millisecond}, Tune: withOpsModels(nil)})
	m.start("watch", watchScript(relay, sys.Edge))

	m.waitScreen("watch", 30*time.Second, "the provider green", true, func(s string) bool {
		return strings.Contains(providerRow(s, "mock"), "\x1b[32mgreen")
	})
	holdOpenBreaker(t, sys, "status watch: breaker")
	s := m.waitScreen("watch", 30*time.Second, "the provider red, its breaker open", true, func(s string) bool {
		row := providerRow(s, "mock")
		return strings.Contains(row, "\x1b[31mred") && strings.Contains(row, "breaker open")
	})
	if !strings.Contains(s, "open") || !strings.Contains(s, "BREAKERS") {
		t.Fatalf("no open breaker in the view:\n%s", s)
	}
	expectOneView(t, m, "watch")

	m.run("send-keys", "-t", "watch", "C-c")
	s = m.waitScreen("watch", 10*time.Second, "the watch ended", false, func(s string) bool { return strings.Contains(s, "relay exited") })
	expectCleanEnd(t, m, "watch", s)
	if row := providerRow(s, "mock"); !strings.Contains(row, "red") {
		t.Errorf("the last view is not left on the screen:\n%s", s)
	}
}

// With the edge unreachable the view says so in red and keeps trying
// (it is redrawn, with a new time) instead of ending; SIGTERM ends it with
// status 0 and the terminal restored.
func TestStatusWatchUnreachableEdge(t *testing.T) {
	m := newTmux(t)
	relay := processBinaries(t).Relay
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	edge := "http://" + l.Addr().String()
	l.Close()
	m.start("down", watchScript(relay, edge))

	first := m.waitScreen("down", 10*time.Second, "the read error in red", true, func(s string) bool {
		return strings.Contains(s, "\x1b[31mcannot read the status since") && strings.Contains(s, "connection refused")
	})
	title := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	m.waitScreen("down", 10*time.Second, "the view redrawn with a new time", true, func(s string) bool {
		return title(s) != title(first) && strings.Contains(s, "cannot read the status since")
	})
	expectOneView(t, m, "down")

	pid := watchPID(t, m, "down")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s := m.waitScreen("down", 10*time.Second, "the watch ended", false, func(s string) bool { return strings.Contains(s, "relay exited") })
	expectCleanEnd(t, m, "down", s)
}

// watchScript runs `relay status --watch` in the terminal with colours
// allowed, then says how it exited and keeps the terminal open. bash, not
// the watch alone, so that the terminal stays as the watch left it: a
// pane whose process ended is redrawn by tmux. bash goes on after Ctrl-C
// because the watch, which got the SIGINT too, exited on its own.
func watchScript(relay, edge string) string {
	return fmt.Sprintf(`unset NO_COLOR; '%s' status --watch --interval 200ms --edge '%s'; echo "relay exited $?"; exec sleep 600`, relay, edge)
}

// providerRow is the row of provider in the view's PROVIDERS table.
func providerRow(screen, provider string) string {
	_, table, ok := strings.Cut(screen, "PROVIDERS")
	if !ok {
		return ""
	}
	// The table ends at the first empty line after its title's.
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			break
		}
		if f[0] == provider {
			return line
		}
	}
	return ""
}

// expectOneView checks that the terminal, its scrollback included, holds
// a single view: each was drawn over the last.
func expectOneView(t *testing.T, m *tmux, session string) {
	t.Helper()
	all := m.screen(session, false, true)
	if n := strings.Count(all, "relay status http://"); n != 1 {
		t.Fatalf("%d views on the terminal and in its scrollback, want 1:\n%s", n, all)
	}
}

// expectCleanEnd checks the end of a watch: status 0, said at the start of
// the row below the view (a "^C" echoed there was wiped), the cursor
// shown, one view on the terminal.
func expectCleanEnd(t *testing.T, m *tmux, session, screen string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "relay exited 0" {
		t.Errorf("the last line is %q, want \"relay exited 0\":\n%s", last, screen)
	}
	if strings.Contains(screen, "^C") {
		t.Errorf("a ^C is left on the screen:\n%s", screen)
	}
	if f := m.format(session, "#{cursor_flag}"); f != "1" {
		t.Errorf("the cursor is hidden after the watch (cursor_flag %s)", f)
	}
	expectOneView(t, m, session)
}

// watchPID is the process id of the watch: the child of the terminal's
// bash.
func watchPID(t *testing.T, m *tmux, session string) int {
	t.Helper()
	shell := m.format(session, "#{pane_pid}")
	b, err := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("bash %s has children %q, want the watch alone", shell, f)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
