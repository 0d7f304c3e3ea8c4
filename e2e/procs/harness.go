package procs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Options configure a Harness. The zero value builds the binaries of the
// working directory's module into a temporary directory.
type Options struct {
	// Dir holds binaries, configuration files, logs and JetStream stores.
	// Empty: a new temporary directory, removed by Close unless KeepDir.
	// A given Dir is never removed (pass t.TempDir() in tests).
	Dir     string
	KeepDir bool
	// ModuleDir is the relay module's root (empty: found with `go list -m`).
	ModuleDir string
	// Binaries skips the build when both paths are set.
	Binaries Binaries
	// Logf receives one line per process started and stopped; nil discards.
	Logf func(format string, args ...any)
	// BuildTimeout bounds building the binaries (zero: 5m, enough for a
	// cold build cache on two cores).
	BuildTimeout time.Duration
	// ReadyTimeout bounds each process's start until ready (zero: 30s; a
	// fresh JetStream cluster needs up to 10s to elect its meta leader).
	ReadyTimeout time.Duration
	// StopTimeout is how long Close waits after SIGTERM before SIGKILL
	// (zero: 10s).
	StopTimeout time.Duration
}

// Harness starts processes and owns them: Close stops every process it
// started, and its directory. It is safe for concurrent use.
type Harness struct {
	opts    Options
	dir     string
	removeD bool
	bin     Binaries

	mu     sync.Mutex
	procs  []*Process
	names  map[string]int // starts per name, for unique log names
	closed bool
	once   sync.Once
	err    error
}

// New creates a harness and builds the binaries unless opts.Binaries has
// them.
func New(ctx context.Context, opts Options) (*Harness, error) {
	if opts.BuildTimeout == 0 {
		opts.BuildTimeout = 5 * time.Minute
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 10 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	h := &Harness{opts: opts, dir: opts.Dir, names: map[string]int{}}
	if h.dir == "" {
		dir, err := os.MkdirTemp("", "relay-procs-")
		if err != nil {
			return nil, fmt.Errorf("procs: %w", err)
		}
		h.dir, h.removeD = dir, !opts.KeepDir
	}
	h.bin = opts.Binaries
	if h.bin.Relay == "" || h.bin.NATSServer == "" {
		buildCtx, cancel := context.WithTimeout(ctx, opts.BuildTimeout)
		defer cancel()
		start := time.Now()
		bin, err := Build(buildCtx, opts.ModuleDir, filepath.Join(h.dir, "bin"))
		if err != nil {
			h.Close()
			return nil, err
		}
		h.bin = bin
		h.opts.Logf("procs: built relay and nats-server in %v", time.Since(start).Round(time.Millisecond))
	}
	return h, nil
}

// Processes returns every process started so far, running or not.
func (h *Harness) Processes() []*Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Process(nil), h.procs...)
}

// start runs s with a log file of its own and tracks the process.
func (h *Harness) start(ctx context.Context, s spec) (*Process, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("procs: harness closed")
	}
	h.names[s.name]++
	logName := s.name + ".log"
	if n := h.names[s.name]; n > 1 {
		logName = fmt.Sprintf("%s.%d.log", s.name, n)
	}
	h.mu.Unlock()

	p, err := startProcess(ctx, s, filepath.Join(h.dir, logName), h.opts.ReadyTimeout)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		p.Kill()
		return nil, errors.New("procs: harness closed")
	}
	h.procs = append(h.procs, p)
	h.opts.Logf("procs: %s ready (pid %d) %s", p.Name, p.Pid(), p.URL)
	return p, nil
}

// Restart starts p's command again, with the same configuration, ports and
// store, once p has exited (Kill or Term and Wait it first). The new
// process logs to a new file.
func (h *Harness) Restart(ctx context.Context, p *Process) (*Process, error) {
	select {
	case <-p.Exited():
	default:
		return nil, fmt.Errorf("procs: restart %s: still running", p.Name)
	}
	return h.start(ctx, p.spec)
}

// Close stops every process: the roles first, then the NATS servers, each
// group with SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, up
// to StopTimeout for them to exit, then SIGKILL. It removes the directory
// if the harness created it. Close is idempotent and returns the first
// call's result.
func (h *Harness) Close() error {
	h.once.Do(func() {
		h.mu.Lock()
		h.closed = true
		all := h.procs
		h.mu.Unlock()
		var roles, servers []*Process
		for _, p := range all {
			if p.spec.nats {
				servers = append(servers, p)
			} else {
				roles = append(roles, p)
			}
		}
		h.err = errors.Join(h.stopAll(roles), h.stopAll(servers))
		if h.removeD {
			h.err = errors.Join(h.err, os.RemoveAll(h.dir))
		} else {
			h.opts.Logf("procs: logs kept in %s", h.dir)
		}
	})
	return h.err
}

func (h *Harness) stopAll(ps []*Process) error {
	var running []*Process
	for _, p := range ps {
		select {
		case <-p.Exited():
			continue
		default:
		}
		p.Cont()
		p.Term()
		running = append(running, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.StopTimeout)
	defer cancel()
	var errs []error
	for _, p := range running {
		if p.Wait(ctx) != nil && ctx.Err() != nil {
			h.opts.Logf("procs: %s did not stop within %v of SIGTERM; killing it", p.Name, h.opts.StopTimeout)
			errs = append(errs, p.Kill())
		}
	}
	return errors.Join(errs...)
}
