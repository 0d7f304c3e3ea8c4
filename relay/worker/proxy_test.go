package worker

import (
	"net"
	"sync"
	"testing"
)

// pausableProxy forwards TCP connections to a NATS server and can hold
// everything in both directions, as SIGSTOP holds a process: the worker
// behind it keeps running in the test process, but the cluster hears
// nothing from it and it hears nothing back, until resume delivers what was
// held, in order.
type pausableProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newPausableProxy(t *testing.T, target string) *pausableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// URL is where the worker connects.
func (p *pausableProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *pausableProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
}

func (p *pausableProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	p.cond.Broadcast()
}

func (p *pausableProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(out, in) })
		p.wg.Go(func() { p.pipe(in, out) })
	}
}

// pipe copies src to dst, holding each read while paused.
func (p *pausableProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// EOF, a reset, or the proxy closing: the pipe ends.
			return
		}
	}
}

func (p *pausableProxy) close() {
	p.ln.Close()
	p.resume()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
