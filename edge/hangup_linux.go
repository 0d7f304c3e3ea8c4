//go:build linux

package edge

import (
	"net"
	"sync"
	"syscall"
)

// hangups tells taken-over SSE connections that their client closed them,
// from one goroutine per process waiting in an epoll instance of its own
// for every registered connection's hang-up (EPOLLRDHUP, or an error):
// a waiting stream then needs no goroutine blocked reading its connection.
// Only the hang-up is asked for, once (EPOLLONESHOT); what a client sends
// is left in the socket and dropped when the connection ends.
type hangups struct {
	epfd int
	mu   sync.Mutex
	last int32
	fns  map[int32]func()
}

var (
	hangupsOnce sync.Once
	theHangups  *hangups
)

// watchHangup calls fn once conn's client hangs up, until stop is called;
// ok is false when conn cannot be watched so (the caller reads it
// instead). stop also drops what the client sent and was not read, so
// that closing the connection sends a FIN, not a reset that could cut
// the end of the response.
func watchHangup(conn net.Conn, fn func()) (stop func(), ok bool) {
	hangupsOnce.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		theHangups = &hangups{epfd: fd, fns: map[int32]func(){}}
		go theHangups.run()
	})
	h := theHangups
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		conn = nc.NetConn()
	}
	sc, isSC := conn.(syscall.Conn)
	if h == nil || !isSC {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	h.mu.Lock()
	h.last++
	id := h.last
	h.fns[id] = fn
	h.mu.Unlock()
	forget := func() {
		h.mu.Lock()
		delete(h.fns, id)
		h.mu.Unlock()
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: id}
		cerr = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		forget()
		return nil, false
	}
	return func() {
		forget()
		_ = rc.Read(func(fd uintptr) bool {
			var b [512]byte
			for {
				if n, err := syscall.Read(int(fd), b[:]); n <= 0 || err != nil {
					break
				}
			}
			_ = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
			return true
		})
	}, true
}

func (h *hangups) run() {
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(h.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Not expected: epfd stays open. Streams then learn that
			// their client left at their next write.
			return
		}
		for _, ev := range events[:n] {
			h.mu.Lock()
			fn := h.fns[ev.Fd]
			delete(h.fns, ev.Fd)
			h.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
	}
}
