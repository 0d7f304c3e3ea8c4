package statusview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/relaydev/relay/relay/fleet"
)

// Watch is `relay status --watch`: it redraws the view every
// interval, in place on a terminal (tty), until SIGINT or SIGTERM; then
// it leaves the terminal as it found it but for the last view, and
// succeeds.
func Watch(out io.Writer, src Source, tty, color bool, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &watcher{
		read: func(ctx context.Context) (fleet.Status, error) {
			st, _, err := src.Read(ctx)
			return st, err
		},
		edge: src.Edge, out: out, color: color, interval: interval, now: time.Now,
	}
	if tty {
		fd := int(out.(*os.File).Fd())
		w.screen = &screen{out: out, rows: func() int {
			_, rows, err := term.GetSize(fd)
			if err != nil {
				return 0
			}
			return rows
		}}
	}
	return w.run(ctx)
}

// watcher reads the status every interval and draws it. A failed read
// does not end the watch: the view says so in red, above the last status
// read, until a read succeeds again.
type watcher struct {
	read     func(context.Context) (fleet.Status, error)
	edge     string
	out      io.Writer
	screen   *screen // nil when out is no terminal: views follow each other
	color    bool
	interval time.Duration
	now      func() time.Time

	last   fleet.Status
	lastAt time.Time // zero before the first read succeeded
	// failing is the last read's error, nil if it succeeded; failingSince
	// is when the reads began to fail.
	failing      error
	failingSince time.Time
}

// run draws until ctx ends, which is a clean end; only a failed write to
// out (a closed terminal or pipe) is an error.
func (w *watcher) run(ctx context.Context) error {
	if w.screen != nil {
		if err := w.screen.open(); err != nil {
			return err
		}
		defer w.screen.close()
	}
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		if err := w.refresh(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// refresh reads the status once and draws the view.
func (w *watcher) refresh(ctx context.Context) error {
	st, err := w.read(ctx)
	if ctx.Err() != nil {
		// Stopped while reading: the read failed for that alone.
		return nil
	}
	now := w.now()
	switch {
	case err == nil:
		w.last, w.lastAt, w.failing = st, now, nil
	case w.failing == nil:
		w.failing, w.failingSince = err, now
	default:
		w.failing = err
	}
	var view bytes.Buffer
	w.render(&view, now)
	if w.screen != nil {
		return w.screen.draw(view.Bytes())
	}
	view.WriteString("\n")
	_, err = w.out.Write(view.Bytes())
	return err
}

// render writes the view: a title line, the read error if the last read
// failed, and the last status read.
func (w *watcher) render(b *bytes.Buffer, now time.Time) {
	fmt.Fprintf(b, "%s  every %v  %s  (Ctrl-C to quit)\n", colored(w.color, bold, "relay status "+w.edge), w.interval, now.Format("15:04:05"))
	if err := w.failing; err != nil {
		// The title names the edge already: an HTTP client error is
		// shown without the request's method and URL.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		fmt.Fprintln(b, colored(w.color, red, fmt.Sprintf("cannot read the status since %s (retrying every %v): %v",
			w.failingSince.Format("15:04:05"), w.interval, err)))
		if !w.lastAt.IsZero() {
			fmt.Fprintf(b, "below: the status as read at %s\n", w.lastAt.Format("15:04:05"))
		}
	}
	if w.lastAt.IsZero() {
		return
	}
	b.WriteString("\n")
	Print(b, w.last, w.color, now)
}
