package relaytest

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/streams"
)

// Regions are two regions on loopback (configs/README.md "Regions"): A is the home,
// a hub with JetStream domain "a"; B is a leaf with domain "b" that joins
// A through Link, a proxy the test can cut and heal.
type Regions struct {
	A, B *server.Server
	Link *Proxy
}

// Region domains of Regions.
const (
	DomainA = "a"
	DomainB = "b"
)

// TwoRegions starts both regions with file storage under t.TempDir(),
// waits until B has joined A, and shuts everything down when the test
// ends.
func TwoRegions(t testing.TB) *Regions {
	t.Helper()
	a, err := natsserver.Start(natsserver.Config{
		StoreDir: t.TempDir(),
		Domain:   DomainA,
		Leaf:     natsserver.LeafConfig{Listen: "127.0.0.1:-1"},
	})
	if err != nil {
		t.Fatalf("start region a: %v", err)
	}
	t.Cleanup(func() { a.Shutdown(); a.WaitForShutdown() })
	hub, err := natsserver.LeafURL(a)
	if err != nil {
		t.Fatal(err)
	}
	link := NewProxy(t, strings.TrimPrefix(hub, "nats-leaf://"))
	b, err := natsserver.Start(natsserver.Config{
		StoreDir: t.TempDir(),
		Domain:   DomainB,
		Leaf:     natsserver.LeafConfig{Remotes: []string{"nats-leaf://" + link.Addr()}},
	})
	if err != nil {
		t.Fatalf("start region b: %v", err)
	}
	t.Cleanup(func() { b.Shutdown(); b.WaitForShutdown() })
	r := &Regions{A: a, B: b, Link: link}
	Eventually(t, 10*time.Second, 5*time.Millisecond, r.Joined)
	return r
}

// Joined reports whether the leaf connection between the regions is up
// on both sides.
func (r *Regions) Joined() bool {
	return natsserver.LeafConnected(r.A) && natsserver.LeafConnected(r.B)
}

// Proxy forwards TCP connections to a target until it is cut: then it
// closes every connection and drops new ones at once, as a network
// partition looks to the servers on both sides, until it is healed.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port). It stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every proxied connection, and every new one, until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track registers a connection pair, unless the proxy was cut meanwhile.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		in.Close()
		out.Close()
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// ConnectRegion connects to s as a process of region r does: through
// region.Regional, with the relay's streams and the region's mirrors set
// up. The connection closes when the test ends; Run is not started.
func ConnectRegion(t testing.TB, s *server.Server, top streams.Topology, r region.Region) (*nats.Conn, *region.Regional) {
	t.Helper()
	nc, js, err := natsconn.Connect(natsconn.Config{URL: s.ClientURL()}, t.Name(), Logger(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	g, err := region.NewRegional(js, top, r, Logger(t).With("region", r.Name))
	if err != nil {
		t.Fatal(err)
	}
	setUp(t, func(ctx context.Context) error {
		if err := streams.Setup(ctx, g, top); err != nil {
			return err
		}
		return region.SetupRegion(ctx, g, top, r)
	})
	return nc, g
}
