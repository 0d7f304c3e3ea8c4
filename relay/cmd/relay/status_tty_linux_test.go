package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/wire"
)

// openPTY opens a pseudo-terminal: what is written to tty is read from
// ptm.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptm, tty
}

// `relay status` paints a terminal, and nothing else: not with NO_COLOR
// set, not with --no-color, not a pipe.
func TestStatusColorsOnlyATerminal(t *testing.T) {
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(fleet.Status{Health: []wire.Health{{Provider: "openai", State: wire.HealthRed}}})
	}))
	defer edge.Close()
	// status runs `relay status` with the output on a terminal, or on a
	// pipe, and returns what it printed.
	status := func(t *testing.T, terminal bool, args ...string) string {
		var r, w *os.File
		if terminal {
			r, w = openPTY(t)
		} else {
			var err error
			if r, w, err = os.Pipe(); err != nil {
				t.Fatal(err)
			}
			defer r.Close()
		}
		read := make(chan string)
		go func() {
			// A terminal's reader ends with EIO once the other side is
			// closed.
			b, _ := io.ReadAll(r)
			read <- string(b)
		}()
		err := run(append([]string{"status", "--edge", edge.URL}, args...), w, io.Discard)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		return <-read
	}
	t.Setenv("NO_COLOR", "")
	if got := status(t, true); !strings.Contains(got, "\x1b[31mred") {
		t.Errorf("no red on a terminal: %q", got)
	}
	if got := status(t, true, "--no-color"); strings.Contains(got, "\x1b[") || !strings.Contains(got, "red") {
		t.Errorf("escape codes with --no-color: %q", got)
	}
	if got := status(t, false); strings.Contains(got, "\x1b[") || !strings.Contains(got, "red") {
		t.Errorf("escape codes on a pipe: %q", got)
	}
	t.Setenv("NO_COLOR", "1")
	if got := status(t, true); strings.Contains(got, "\x1b[") || !strings.Contains(got, "red") {
		t.Errorf("escape codes on a terminal with NO_COLOR set: %q", got)
	}
}
