package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints what the benchmark is doing on stderr, so that a
// ten-minute run is visibly alive; the result table goes to stdout.
type progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// every prints status() every d until the returned stop is called.
func (p *progress) every(ctx context.Context, d time.Duration, status func() string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.printf("  %s", status())
			}
		}
	}()
	return func() { cancel(); <-done }
}
