package procs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one running child: a nats-server node or a relay role.
type Process struct {
	// Name identifies the process in logs and errors; for a worker it is
	// also its worker.id, so claim frames name the process.
	Name string
	// URL is what the ready line announced ("http://127.0.0.1:port" for an
	// edge, ".../v1" for the fake upstream); "nats://..." for a NATS node;
	// empty for a worker.
	URL string
	// Addr is URL's host:port; empty when URL is.
	Addr string
	// NATS is the client URL of the server a Dev process embeds.
	NATS string
	// LogPath is the file holding the process's stderr and stdout.
	LogPath string

	spec spec
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// spec is everything needed to start a process again (Harness.Restart).
type spec struct {
	name  string
	path  string
	args  []string
	url   string // known before start (nats), else parsed from the ready line
	ready readiness
	// nats marks servers, which Close stops after the roles using them.
	nats bool
	// embedded is the client URL of the server a Dev process embeds.
	embedded string
	// env is added to the process's environment.
	env []string
}

// readiness says when a started process serves. Exactly one field is set.
type readiness struct {
	// line matches the process's ready line on stdout and returns the URL
	// it announces.
	line func(string) (url string, ok bool)
	// probe is polled until it returns nil.
	probe func(context.Context) error
}

// startProcess runs s and waits, at most timeout, until it is ready. A
// process that exits or does not become ready in time is killed and its
// log's tail returned in the error.
func startProcess(ctx context.Context, s spec, logPath string, timeout time.Duration) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("procs: %s: %w", s.name, err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("procs: %s: %w", s.name, err)
	}
	cmd := exec.Command(s.path, s.args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, logFile
	// The child is killed when this program dies, however it dies: a
	// benchmark that panics or a test binary killed on timeout must not
	// leave servers holding ports and CPU.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		stdoutR.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("procs: start %s: %w", s.name, err)
	}
	stdoutW.Close()
	p := &Process{Name: s.name, URL: s.url, Addr: hostPort(s.url), NATS: s.embedded, LogPath: logPath, spec: s, cmd: cmd, done: make(chan struct{})}

	readyLine := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdoutR)
		matched := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(logFile, "stdout: %s\n", line)
			if !matched && s.ready.line != nil {
				if url, ok := s.ready.line(line); ok {
					matched = true
					readyLine <- url
				}
			}
		}
		stdoutR.Close()
	}()
	go func() {
		p.err = cmd.Wait()
		<-copied
		logFile.Close()
		close(p.done)
	}()

	if err := p.awaitReady(ctx, readyLine, timeout); err != nil {
		p.Kill()
		return nil, fmt.Errorf("procs: %s: %w\n%s", s.name, err, p.tail(20))
	}
	return p, nil
}

func (p *Process) awaitReady(ctx context.Context, readyLine <-chan string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p.spec.ready.probe != nil {
		for {
			if err := p.spec.ready.probe(ctx); err == nil {
				return nil
			}
			select {
			case <-p.done:
				return fmt.Errorf("exited before it was ready: %v", p.err)
			case <-ctx.Done():
				return fmt.Errorf("not ready: %w", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	select {
	case url := <-readyLine:
		p.URL, p.Addr = url, hostPort(url)
		return nil
	case <-p.done:
		return fmt.Errorf("exited before it was ready: %v", p.err)
	case <-ctx.Done():
		return fmt.Errorf("no ready line: %w", ctx.Err())
	}
}

// hostPort returns the host:port of a URL such as "http://127.0.0.1:80/v1".
func hostPort(url string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return ""
	}
	hp, _, _ := strings.Cut(rest, "/")
	return hp
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("procs: %s: signal %v: %w", p.Name, sig, err)
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone. Killing a process
// that already exited is not an error.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("procs: %s: kill: %w", p.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	if err := p.Wait(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// killWait bounds how long a SIGKILLed process may take to be reaped.
const killWait = 10 * time.Second

// Stop pauses the process with SIGSTOP, as a long GC pause or a partition
// would: its connections stay open, it sends and acknowledges nothing.
func (p *Process) Stop() error { return p.Signal(syscall.SIGSTOP) }

// Cont resumes a process paused by Stop.
func (p *Process) Cont() error { return p.Signal(syscall.SIGCONT) }

// Term asks the process to shut down gracefully (SIGTERM); Wait for it.
func (p *Process) Term() error { return p.Signal(syscall.SIGTERM) }

// Wait waits until the process exits or ctx ends. It returns the exit
// error (nil for status 0, "signal: killed" after Kill) or ctx's error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("procs: %s still running: %w", p.Name, ctx.Err())
	}
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// RSS is the process's resident set size in bytes (VmRSS in
// /proc/<pid>/status).
func (p *Process) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("procs: %s: rss: %w", p.Name, err)
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest)) // "12345", "kB"
		if len(fields) != 2 || fields[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("procs: %s: rss: no VmRSS line (exited?)", p.Name)
}

// CPUTime is the processor time the process has used so far, user and
// system (utime + stime in /proc/<pid>/stat), to tell which role a load
// keeps busy.
func (p *Process) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("procs: %s: cpu: %w", p.Name, err)
	}
	// Fields after the command, which is in parentheses and may hold
	// spaces: state is the first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	if i < 0 || len(fields) < 13 {
		return 0, fmt.Errorf("procs: %s: cpu: malformed /proc stat", p.Name)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procs: %s: cpu: %w", p.Name, err)
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// Log returns what the process has logged so far.
func (p *Process) Log() (string, error) {
	b, err := os.ReadFile(p.LogPath)
	return string(b), err
}

// tail returns the last n lines of the log, for error messages.
func (p *Process) tail(n int) string {
	log, err := p.Log()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + p.LogPath + ":\n    " + strings.Join(lines, "\n    ")
}
