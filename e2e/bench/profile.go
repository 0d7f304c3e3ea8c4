package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// With --profile DIR, the open-loop phase's relay (its edge and its
// workers, each a process) serves Go's profiles (pprof_listen), and a CPU
// profile of each is taken while the relay takes each round of the first
// load (Poisson arrivals at 50 % of capacity): DIR/<process>-round<n>.pprof.
// `go tool pprof -top DIR/openloop-edge-round*.pprof` reads a process's
// rounds together. The memory phase's worker does too, and its heap and
// goroutine profiles are taken once its generations are in flight:
// DIR/<process>-heap.pprof and -goroutine.pprof.

// pprofSetting has a role serve its profiles on a free loopback port.
var pprofSetting = procs.Settings{"pprof_listen": "127.0.0.1:0"}

// pprofLine is the log line a role writes once its profiles are served.
var pprofLine = regexp.MustCompile(`msg="pprof listening" addr=(\S+)`)

// pprofAddr is where p serves its profiles, from its log.
func pprofAddr(p *procs.Process) (string, error) {
	log, err := p.Log()
	if err != nil {
		return "", err
	}
	m := pprofLine.FindStringSubmatch(log)
	if m == nil {
		return "", fmt.Errorf("profile: %s logged no pprof address", p.Name)
	}
	return m[1], nil
}

// profileCPU takes a CPU profile of each of ps over the next span, in the
// background, into dir as <name><suffix>.pprof; wait returns once every
// profile is written, with the first error.
func profileCPU(ctx context.Context, ps []*procs.Process, span time.Duration, dir, suffix string) (wait func() error) {
	seconds := max(1, int((span+time.Second-1)/time.Second))
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for _, p := range ps {
		wg.Go(func() {
			what := fmt.Sprintf("profile?seconds=%d", seconds)
			if err := fetchProfile(ctx, p, what, filepath.Join(dir, p.Name+suffix+".pprof")); err != nil {
				errs <- err
			}
		})
	}
	return func() error {
		wg.Wait()
		close(errs)
		return <-errs
	}
}

// profileMemory writes p's heap and goroutine profiles into dir.
func profileMemory(ctx context.Context, p *procs.Process, dir string) error {
	for _, what := range []string{"heap", "goroutine"} {
		if err := fetchProfile(ctx, p, what, filepath.Join(dir, p.Name+"-"+what+".pprof")); err != nil {
			return err
		}
	}
	return nil
}

// fetchProfile writes p's profile what (a path under /debug/pprof/, with
// its query) to path.
func fetchProfile(ctx context.Context, p *procs.Process, what, path string) error {
	addr, err := pprofAddr(p)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s/debug/pprof/%s", addr, what)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", p.Name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", p.Name, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return f.Close()
}
