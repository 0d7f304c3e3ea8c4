package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tmux is a private tmux server: the terminal a test runs a command in,
// types into and reads the screen of, as a person would see it.
type tmux struct {
	t            *testing.T
	bin, socket  string
	conf         string
	width, lines int
}

// newTmux starts nothing yet; the server starts with the first session
// and is killed when the test ends. A machine without tmux fails the test:
// e2e/setup.sh installs it.
func newTmux(t *testing.T) *tmux {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is missing (e2e/setup.sh installs it): %v", err)
	}
	dir := t.TempDir()
	m := &tmux{t: t, bin: bin, socket: filepath.Join(dir, "tmux.sock"), conf: filepath.Join(dir, "tmux.conf"), width: 160, lines: 40}
	// An empty configuration: the machine's own ~/.tmux.conf does not
	// apply.
	if err := os.WriteFile(m.conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(m.bin, "-S", m.socket, "kill-server").Run() })
	return m
}

// run runs a tmux command against the test's server and returns its
// output.
func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command(m.bin, append([]string{"-S", m.socket, "-f", m.conf}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start opens session name, a terminal of the tmux's size running the
// bash script.
func (m *tmux) start(name, script string) {
	m.t.Helper()
	m.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(m.width), "-y", strconv.Itoa(m.lines), "--", "bash", "-c", script)
}

// screen is what session name shows, as text; with escapes, its colours
// too (as SGR sequences); with history, the scrollback above it as well.
func (m *tmux) screen(name string, escapes, history bool) string {
	m.t.Helper()
	args := []string{"capture-pane", "-p", "-t", name}
	if escapes {
		args = append(args, "-e")
	}
	if history {
		args = append(args, "-S", "-")
	}
	return m.run(args...)
}

// format is the value of a tmux format (#{...}) for session name.
func (m *tmux) format(name, format string) string {
	m.t.Helper()
	return strings.TrimSpace(m.run("display-message", "-p", "-t", name, format))
}

// waitScreen waits until session name's screen satisfies cond and
// returns it.
func (m *tmux) waitScreen(name string, wait time.Duration, what string, escapes bool, cond func(screen string) bool) string {
	m.t.Helper()
	var s string
	deadline := time.Now().Add(wait)
	for s = m.screen(name, escapes, false); !cond(s); s = m.screen(name, escapes, false) {
		if time.Now().After(deadline) {
			m.t.Fatalf("%s: not within %v; the screen:\n%s", what, wait, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}
