package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proxyEnv names the upstream a bench process started with it proxies
// to. The bare proxy is the floor the open-loop figures compare the relay
// with, so it runs as a process of its own, like every role: its
// processor time is then its own, not mixed with the clients'. Re-running
// the benchmark's own executable spares building another binary.
const proxyEnv = "RELAY_BENCH_PROXY_TARGET"

// proxyH2CEnv, set to 1, has the bare proxy call its upstream over h2c
// (the plan's h2c).
const proxyH2CEnv = "RELAY_BENCH_PROXY_H2C"

// init turns this process into the bare proxy when proxyEnv is set; it
// runs before main, so the benchmark's flags are never parsed there.
func init() {
	target := os.Getenv(proxyEnv)
	if target == "" {
		return
	}
	if err := serveProxy(target, os.Getenv(proxyH2CEnv) == "1"); err != nil {
		fmt.Fprintln(os.Stderr, "bench proxy:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveProxy serves httputil.ReverseProxy in front of target on a free
// loopback port, and prints its URL on stdout once it listens. It
// flushes every write at once (FlushInterval -1), as a proxy in front
// of an event stream must, and keeps as many idle upstream connections
// as it has clients, as the relay's workers do; with h2c, it calls
// target over HTTP/2 without TLS, as the relay's workers then do.
func serveProxy(target string, h2c bool) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	t := &http.Transport{MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}
	if h2c {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1,
		Transport:     t,
	}
	fmt.Printf("http://%s\n", ln.Addr())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request body before proxying, as nginx does by
		// default: an HTTP/1 server closes the unread rest of a request
		// body once the response headers are written, and the transport's
		// last read of it, which checks it is not longer than declared,
		// would then fail and cut the answer already streaming (Go issue
		// 40747).
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	}))
}

// proxyProc is a running bare proxy.
type proxyProc struct {
	cmd *exec.Cmd
	// URL is where it listens ("http://127.0.0.1:port").
	URL string
}

// startProxy starts a bare proxy in front of the fake upstream whose URL
// (ending in /v1) is upstream, calling it over h2c if h2c is set.
func startProxy(ctx context.Context, upstream string, h2c bool) (*proxyProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), proxyEnv+"="+strings.TrimSuffix(upstream, "/v1"))
	if h2c {
		cmd.Env = append(cmd.Env, proxyH2CEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	// Killed when the benchmark dies, like every process it starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proxyProc{cmd: cmd}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case l, ok := <-line:
		if ok && strings.HasPrefix(l, "http://") {
			p.URL = l
			return p, nil
		}
		p.stop()
		return nil, fmt.Errorf("bare proxy: unexpected first line %q", l)
	case <-ctx.Done():
		p.stop()
		return nil, fmt.Errorf("bare proxy: not ready: %w", ctx.Err())
	}
}

// stop kills the proxy and waits for it.
func (p *proxyProc) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// CPUTime is the processor time the proxy has used so far (utime + stime
// in /proc/<pid>/stat, as procs.Process.CPUTime reads it for the roles).
func (p *proxyProc) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// After the command in parentheses: state is the first field, utime
	// the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bare proxy: malformed /proc stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("bare proxy: malformed /proc stat")
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
