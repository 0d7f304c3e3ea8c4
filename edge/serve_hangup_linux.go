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
//
// The goroutine and the epoll instance last while a connection is
// watched: the last stop wakes the goroutine through a pipe, and it ends,
// so that an edge that stopped leaves nothing running.
type hangups struct {
	epfd int
	// wakeR and wakeW are the pipe; wakeR is in epfd under id wakeID.
	wakeR, wakeW int
	mu           sync.Mutex
	last         int32
	fns          map[int32]func()
	// watching counts the watches not stopped yet, fired or not.
	watching int
}

// wakeID is the epoll id of the wake pipe; connections get ids from 1.
const wakeID = 0

var (
	// hangupsMu guards theHangups, and is held while a watch is added, so
	// that the goroutine cannot end in between.
	hangupsMu  sync.Mutex
	theHangups *hangups
)

// startHangups returns a running hangups, nil if epoll is not available.
func startHangups() *hangups {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(fd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: wakeID}
	if err := syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		syscall.Close(fd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil
	}
	h := &hangups{epfd: fd, wakeR: p[0], wakeW: p[1], fns: map[int32]func(){}}
	go h.run()
	return h
}

// canWatchHangup says that watchHangup can watch a connection without
// reading it, so that what its client sends next stays in the socket
// (serve_keepalive.go).
const canWatchHangup = true

// watchHangup calls fn once conn's client hangs up, until stop is called;
// ok is false when conn cannot be watched so (the caller reads it
// instead). stop(true), for a connection about to be closed, also drops
// what the client sent and was not read, so that closing it sends a FIN,
// not a reset that could cut the end of the response; stop(false), for
// one kept alive, leaves the client's next request in the socket.
func watchHangup(conn net.Conn, fn func()) (stop func(drop bool), ok bool) {
	for { // TLS, the connection cap's and the listener's wrappers
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = nc.NetConn()
	}
	sc, isSC := conn.(syscall.Conn)
	if !isSC {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	hangupsMu.Lock()
	defer hangupsMu.Unlock()
	if theHangups == nil {
		theHangups = startHangups()
	}
	h := theHangups
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	if h.last++; h.last == wakeID {
		h.last++ // wrapped around
	}
	id := h.last
	h.fns[id] = fn
	h.watching++
	h.mu.Unlock()
	forget := func() {
		h.mu.Lock()
		delete(h.fns, id)
		h.mu.Unlock()
	}
	release := func() {
		h.mu.Lock()
		h.watching--
		if h.watching == 0 {
			// Under mu, so that the pipe is still open.
			_, _ = syscall.Write(h.wakeW, []byte{0})
		}
		h.mu.Unlock()
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: id}
		cerr = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		forget()
		release()
		return nil, false
	}
	var once sync.Once
	return func(drop bool) {
		once.Do(func() {
			forget()
			_ = rc.Read(func(fd uintptr) bool {
				var b [512]byte
				for drop {
					if n, err := syscall.Read(int(fd), b[:]); n <= 0 || err != nil {
						break
					}
				}
				_ = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
				return true
			})
			// Last: epfd stays open while the watch counts.
			release()
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
			if ev.Fd == wakeID {
				if h.idle() {
					return
				}
				continue
			}
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

// idle drains the wake pipe and, if no connection is watched, ends the
// hangups: it closes the descriptors and reports true.
func (h *hangups) idle() bool {
	hangupsMu.Lock()
	defer hangupsMu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	var b [64]byte
	for {
		if n, err := syscall.Read(h.wakeR, b[:]); n <= 0 || err != nil {
			break
		}
	}
	if h.watching > 0 {
		return false
	}
	syscall.Close(h.epfd)
	syscall.Close(h.wakeR)
	syscall.Close(h.wakeW)
	if theHangups == h {
		theHangups = nil
	}
	return true
}
