package edge

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/runners"
)

// # SSE streams driven by events
//
// A stream waits for its next token most of the time: at 10,000 streams on
// one edge, a goroutine and net/http's buffers per waiting stream are most
// of the edge's memory. So over HTTP/1.1 an SSE response takes its
// connection over from net/http (http.ResponseController.Hijack), writes
// the response head itself, and lets the handler return once the stream
// first waits. From then on the stream is driven by events: the hub's
// live frames, the follower's idle and retry timers, the edge draining, the
// client going away. Each schedules the stream; a goroutine runs it only
// while there is work, and writes each batch with writeTimeout as before.
// That goroutine is one of the edge's runners (relay/runners), which wait for
// the next stream's work after one's is done, so that the stack a stream
// grew while it rendered and wrote is there for the next token.
//
// The body is chunked, as net/http would write it, so that a client tells
// a complete response from a cut connection. Once the response ended, the
// connection goes back to net/http for the client's next request
// (serve_keepalive.go), unless the response said "Connection: close".
//
// What is left per waiting stream is the connection, the follower and its
// subscription. The edge still learns at once that a client closed its
// connection, as net/http's background read told it (the disconnect
// policy acts on it, and the stream stops being followed): on Linux from
// one epoll instance that watches every such connection for its hang-up
// (serve_hangup_linux.go), elsewhere from a goroutine per connection blocked
// reading it (2 KiB of stack each).
//
// HTTP/2 connections cannot be taken over; neither are the demo's
// droppable streams (their drop cancels the request's context, which ends
// with the handler). Those are served by their handler's goroutine.

// errClientLeft ends a taken-over stream's context when its client hung up.
var errClientLeft = errors.New("edge: the client hung up")

// sseConn is an SSE stream on a connection taken over from net/http.
type sseConn struct {
	*sseStream
	conn net.Conn
	w    *chunkedConn
	// runners run the stream when it is scheduled; serve is its run
	// method, taken once so that scheduling allocates nothing.
	runners *runners.Pool
	serve   func()
	// pending counts the notifications since the running goroutine last
	// found nothing to do; the goroutine runs while it is above zero, and
	// it stays above zero once the stream is over, so that nothing starts
	// another.
	pending atomic.Int64
	// gone is set once the client hung up.
	gone atomic.Bool
	// leave ends the stream's context when the client hangs up, so that a
	// read of the log in progress stops rather than run to its end for
	// no one (and hold up the reads behind it on the edge's connection).
	leave context.CancelCauseFunc
	// unwatch stops watching the connection for the client's hang-up.
	unwatch func(drop bool)
	// keep is the connection to give back for the client's next request
	// once the response ended, nil if it is closed (serve_keepalive.go).
	keep     *keptConn
	done     func()
	stopDone func() bool
}

// takeOver serves st on w's connection, driven by events, if it can be
// taken over, and reports whether it was.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request, st *sseStream) bool {
	if r.ProtoMajor != 1 || !r.ProtoAtLeast(1, 1) || r.Method == http.MethodHead || s.cfg.Demo {
		return false
	}
	// net/http's buffers are let go of: if they held anything the client
	// sent after the request, it is dropped and the response says
	// Connection: close.
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	keep := reusable(conn, r, buf.Reader.Buffered())
	// A body the handler never read (a GET carrying one) left its read
	// deadline on the connection (admit_body.go); the hang-up watch reads on.
	conn.SetReadDeadline(time.Time{})
	h := w.Header()
	if keep == nil {
		h.Set("Connection", "close")
	}
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	// Room for a common head, so that it is not grown header by header.
	head := bytes.NewBuffer(make([]byte, 0, headRoom))
	head.WriteString("HTTP/1.1 200 OK\r\n")
	h.Write(head)
	head.WriteString("\r\n")

	c := &sseConn{sseStream: st, conn: conn, w: &chunkedConn{conn: conn, head: head.Bytes()}, runners: s.runners, keep: keep}
	c.serve = c.run
	var base context.Context
	base, c.leave = context.WithCancelCause(context.Background())
	st.ctx, c.done = s.clients.add(base, clientSSE)
	st.gone = c.gone.Load
	st.out.dst = c.w
	c.pending.Store(1)
	if over, left := st.begin(); over {
		c.end(left)
		return true
	}
	st.f.SetNotify(c.schedule, s.cfg.Keepalive)
	c.stopDone = context.AfterFunc(st.ctx, c.schedule)
	var watched bool
	if c.unwatch, watched = watchHangup(conn, c.hangUp); !watched {
		// The reader drops what the client sends next: the connection
		// is closed after the response, whatever its head said.
		c.keep = nil
		go c.watch()
	}
	// A resume's first read was started with the request's context, which
	// ends with this handler: this goroutine waits for it, then serves the
	// stream until it first waits.
	_ = st.f.AwaitFirst(st.ctx)
	c.run()
	return true
}

// headRoom is what a taken-over response's head is given room for: its
// headers, with a resume token, take about 350 bytes.
const headRoom = 512

// schedule has a runner serve the stream, unless one does.
func (c *sseConn) schedule() {
	if c.pending.Add(1) == 1 {
		c.runners.Run(c.serve)
	}
}

// run serves the stream until there is nothing to do; a notification that
// came while it worked makes it look again.
func (c *sseConn) run() {
	for {
		n := c.pending.Load()
		if over, left := c.work(); over {
			c.end(left)
			return
		}
		if c.pending.CompareAndSwap(n, 0) {
			return
		}
	}
}

// work writes what the follower has until it has nothing, or the response
// is over.
func (c *sseConn) work() (over, left bool) {
	for {
		if c.gone.Load() {
			return true, true
		}
		var entries []chunklog.Entry
		var err error
		if c.ctx.Err() != nil {
			err = context.Cause(c.ctx)
		} else {
			var ok bool
			if entries, ok, err = c.f.Poll(c.ctx); !ok {
				return false, false
			}
		}
		if over, left := c.step(entries, err); over {
			return over, left
		}
	}
}

// end ends the response, gives the connection back for the client's next
// request or closes it, and releases the stream.
func (c *sseConn) end(left bool) {
	if !left {
		c.w.end()
	}
	keep := c.keep != nil && !left && c.w.ended && !c.w.failed && !c.gone.Load()
	if c.unwatch != nil {
		c.unwatch(!keep)
	}
	if keep {
		c.keep.giveBack()
	} else {
		c.conn.Close()
	}
	if c.stopDone != nil {
		c.stopDone()
	}
	c.f.Close()
	c.done()
	c.leave(nil)
	c.finish(left)
}

// watch reads the connection until it fails, where the client's hang-up
// cannot be watched otherwise (watchHangup). What a client sends meanwhile
// is dropped; a byte at a time until it sends any.
func (c *sseConn) watch() {
	b := make([]byte, 1)
	for {
		n, err := c.conn.Read(b)
		if err != nil {
			break
		}
		if n > 0 && len(b) == 1 {
			b = make([]byte, 512)
		}
	}
	c.hangUp()
}

// hangUp ends the stream at once, a write in progress included: the client
// is gone.
func (c *sseConn) hangUp() {
	c.gone.Store(true)
	c.leave(errClientLeft)
	c.conn.Close()
	c.schedule()
}

// chunkedConn writes batches to a taken-over connection in HTTP/1.1's
// chunked encoding, the response head before the first.
type chunkedConn struct {
	conn net.Conn
	head []byte
	// ended is set once the last chunk was written (writeLast); failed
	// once a write failed.
	ended, failed bool
}

// lastChunk ends a chunked body.
const lastChunk = "0\r\n\r\n"

// write writes p as one chunk, in one write: copied after its size into a
// pooled buffer (a vectored write would leave the connection a cached
// vector).
func (c *chunkedConn) write(p []byte) error { return c.writeChunk(p, false) }

// writeLast writes p as one chunk and the last chunk after it, in one
// write.
func (c *chunkedConn) writeLast(p []byte) error {
	c.ended = true
	return c.writeChunk(p, true)
}

func (c *chunkedConn) writeChunk(p []byte, last bool) error {
	b := bufs.Get().(*bytes.Buffer)
	defer putBuf(b)
	b.Write(c.head)
	c.head = nil
	if len(p) > 0 { // a zero-size chunk would end the body
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(len(p)), 16))
		b.WriteString("\r\n")
		b.Write(p)
		b.WriteString("\r\n")
	}
	if last {
		b.WriteString(lastChunk)
	}
	return c.send(b.Bytes())
}

// end writes the last chunk, unless it was written or a write failed.
func (c *chunkedConn) end() {
	if !c.ended && !c.failed {
		c.ended = true
		_ = c.send([]byte(lastChunk))
	}
}

func (c *chunkedConn) send(p []byte) error {
	err := c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err == nil {
		_, err = c.conn.Write(p)
	}
	if err != nil {
		c.failed = true
	}
	return err
}
