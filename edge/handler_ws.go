package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// # WebSocket protocol (GET /v1/ws)
//
// Every message is one JSON object with a "type". One connection may follow
// several streams at once; every server message about a stream carries its
// stream_id.
//
//	from    type          fields                              meaning
//	client  start         request: a chat completion request, queue a generation and follow it ("stream" is ignored);
//	                      idempotency_key?                    with idempotency_key, as a POST with Idempotency-Key
//	client  resume        stream_id, after: a cursor or "",   follow a stream after the cursor ("" = from the start); with
//	                      snapshot?                           snapshot, the chunks stored so far come as one chunk
//	                                                          message (follow_snapshot.go), then the live ones
//	client  cancel        stream_id                           cancel a generation, as DELETE /v1/streams/{id} does
//	server  started       stream_id, resume_token,            a start was accepted; answers come in the order starts were
//	                      location, replayed?                 sent; resume_token as in X-Relay-Resume-Token; location,
//	                                                          as the POST's Location, where to resume it; replayed
//	                                                          when an idempotency key attached it to an earlier start
//	server  chunk         stream_id, cursor, chunk            chunk is the chat.completion.chunk an SSE client gets
//	server  end           stream_id, cursor, status,          the stream ended; nothing follows for that stream_id.
//	                      finish_reason?, usage?, error?,     finish_reason when status is "done", error (OpenAI's
//	                      attempts, cost                      shape) otherwise; usage on every status the worker counted
//	server  cancellation  stream_id, status                   the answer to a cancel: the terminal status once the end
//	                                                          frame was seen ("cancelled", or e.g. "done" if it had
//	                                                          finished), "cancelling" if it did not appear within 2 s;
//	                                                          a stream followed here also gets its end, in either order
//	server  error         stream_id?, error                   a start, resume or cancel was refused, or a stream could not
//	                                                          be followed further (code "stream_interrupted": resume it)
//	server  reconnect     retry_ms, error                     the edge is draining (code "edge_draining"): a close 1001
//	                                                          follows; reconnect after retry_ms, to another edge, and
//	                                                          resume each stream after its last cursor
//
// The upgrade request is authenticated like any request (admit_auth.go), or, for
// browsers, which cannot set its headers, by the subprotocols "relay" and
// "relay.bearer.<base64url(key)>": the connection acts for that tenant, and
// may resume and cancel only the tenant's streams (others are not found).
// Browsers may open it from the origins of edge.cors_allowed_origins and
// from the edge's own origin. It may carry X-Relay-On-Disconnect (see
// DisconnectPolicy); that applies to the streams started on the connection
// when the connection ends before they do.
//
// The server pings every Keepalive and drops a client it heard nothing
// from (not even a pong) for two intervals. A message that is valid but
// asks for something impossible (an invalid request, an unknown stream) is
// answered with an error message; a client that breaks the protocol is
// closed with a close code and a reason:
//
//	code  when
//	1001  the edge shuts down (after a reconnect message)
//	1003  a binary message, or a text message that is not a JSON object
//	      with a known type and fields of the right types
//	1008  more than edge.ws_max_messages_per_second messages a second
//	      (bursts of as many allowed); pings and pongs count as messages
//	1009  a message larger than MaxBodyBytes plus a small envelope

// wsEnvelope is the room a WebSocket message has for its envelope beyond
// MaxBodyBytes of request.
const wsEnvelope = 4 << 10

// errWSClosed ends a connection's reader when the client closed or broke
// the connection, so that the writer and the streams stop too.
var errWSClosed = errors.New("edge: websocket closed")

// wsIn is a client message.
type wsIn struct {
	Type           string          `json:"type"`
	Request        json.RawMessage `json:"request"`
	StreamID       string          `json:"stream_id"`
	After          string          `json:"after"`
	IdempotencyKey string          `json:"idempotency_key"`
	Snapshot       bool            `json:"snapshot"`
}

// wsTypes are the client message types.
var wsTypes = map[string]bool{"start": true, "resume": true, "cancel": true}

// wsCloseError ends a connection with a close code, for a client that
// broke the protocol.
type wsCloseError struct {
	code   int
	reason string
}

func (e *wsCloseError) Error() string {
	return fmt.Sprintf("edge: websocket closed with %d: %s", e.code, e.reason)
}

// decodeWSMessage decodes a client message, or says how to close a
// connection that sent it.
func decodeWSMessage(data []byte) (wsIn, *wsCloseError) {
	var in wsIn
	if err := json.Unmarshal(data, &in); err != nil || !wsTypes[in.Type] {
		return wsIn{}, &wsCloseError{websocket.CloseUnsupportedData,
			"a message must be a JSON object with type start, resume or cancel"}
	}
	return in, nil
}

// wsOut is a server message.
type wsOut struct {
	Type         string      `json:"type"`
	StreamID     string      `json:"stream_id,omitempty"`
	Cursor       string      `json:"cursor,omitempty"`
	Chunk        *chat.Chunk `json:"chunk,omitempty"`
	Status       wire.Status `json:"status,omitempty"`
	FinishReason string      `json:"finish_reason,omitempty"`
	Usage        *wire.Usage `json:"usage,omitempty"`
	Error        *chat.Error `json:"error,omitempty"`
	Attempts     int         `json:"attempts,omitempty"`
	Cost         float64     `json:"cost,omitempty"`
	RetryMS      int64       `json:"retry_ms,omitempty"`
	ResumeToken  string      `json:"resume_token,omitempty"`
	Location     string      `json:"location,omitempty"`
	Replayed     bool        `json:"replayed,omitempty"`
}

// handleWS serves GET /v1/ws.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if s.clients.draining() {
		writeDraining(w, s.cfg.RetryHint, drainMessage)
		return
	}
	policy, e := s.disconnectPolicy(r)
	if e != nil {
		writeError(w, e)
		return
	}
	fast, e := failFast(r, principalOf(r))
	if e != nil {
		writeError(w, e)
		return
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the client
	}
	ctx, done := s.clients.add(r.Context(), clientWS)
	defer done()
	c := &wsConn{
		s: s, conn: conn, p: principalOf(r), policy: policy, failFast: fast,
		out:    make(chan wsOut, s.cfg.ClientBuffer),
		active: map[string]bool{},
		limit:  newRateLimiter(s.cfg.WSMaxMessagesPerSecond),
	}
	if err := c.run(ctx); !errors.Is(err, errWSClosed) && !errors.Is(err, errShuttingDown) {
		s.log.Debug("websocket ended", "err", err)
	}
}

// wsConn is one WebSocket client: a reader, a writer, and one goroutine per
// stream it follows or cancels, all feeding the bounded send queue.
type wsConn struct {
	s    *Server
	conn *websocket.Conn
	// p is who the connection acts for.
	p principal
	// limit bounds the rate of client messages; used by the reader only.
	limit *rate.Limiter
	// policy applies to the streams started on this connection.
	policy DisconnectPolicy
	// failFast applies to the streams started on this connection
	// (HeaderFailFast on the upgrade request).
	failFast bool
	out      chan wsOut

	mu     sync.Mutex
	active map[string]bool // streams followed on this connection

	streams sync.WaitGroup
}

func (c *wsConn) run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.readLoop(ctx) })
	g.Go(func() error { return c.writeLoop(ctx) })
	err := g.Wait()
	c.streams.Wait()
	return err
}

func (c *wsConn) readLoop(ctx context.Context) error {
	wait := 2 * c.s.cfg.Keepalive
	c.conn.SetReadLimit(c.s.cfg.MaxBodyBytes + wsEnvelope)
	c.conn.SetReadDeadline(time.Now().Add(wait))
	c.conn.SetPongHandler(func(string) error {
		if !c.limit.Allow() {
			return errWSFlood
		}
		return c.conn.SetReadDeadline(time.Now().Add(wait))
	})
	c.conn.SetPingHandler(c.pong)
	for {
		kind, data, err := c.conn.ReadMessage()
		if errors.Is(err, errWSFlood) || err == nil && !c.limit.Allow() {
			c.s.wsStats.closed[wsClosedFlood].Add(1)
			return &wsCloseError{websocket.ClosePolicyViolation, "too many messages; at most " +
				strconv.FormatFloat(c.s.cfg.WSMaxMessagesPerSecond, 'f', -1, 64) + " a second, pings included"}
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errWSClosed, err)
		}
		if kind != websocket.TextMessage {
			c.s.wsStats.closed[wsClosedUnsupported].Add(1)
			return &wsCloseError{websocket.CloseUnsupportedData, "binary messages are not supported; send JSON text"}
		}
		in, ce := decodeWSMessage(data)
		if ce != nil {
			c.s.wsStats.closed[wsClosedUnsupported].Add(1)
			return ce
		}
		if err := c.handle(ctx, in); err != nil {
			return err
		}
		// Extended after handling, which may take a NATS round trip: pongs
		// that arrived meanwhile are only read by the next ReadMessage.
		c.conn.SetReadDeadline(time.Now().Add(wait))
	}
}

// errWSFlood is what a control frame handler returns to the reader when
// the client's pings and pongs went over the message rate.
var errWSFlood = errors.New("edge: websocket flood")

// pong answers a client's ping, which counts as a message: answering a
// flood of pings costs as much as reading one of messages.
func (c *wsConn) pong(data string) error {
	if !c.limit.Allow() {
		return errWSFlood
	}
	err := c.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
	if errors.Is(err, websocket.ErrCloseSent) {
		return nil // the connection is closing; the reader learns why
	}
	return err
}

// writeLoop sends what is queued, everything queued at once, and pings.
// It closes the connection when it returns, which also ends the reader.
func (c *wsConn) writeLoop(ctx context.Context) error {
	defer c.conn.Close()
	ping := time.NewTicker(c.s.cfg.Keepalive)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			cause := context.Cause(ctx)
			if errors.Is(cause, errShuttingDown) {
				c.reconnect()
			}
			if ce, ok := errors.AsType[*wsCloseError](cause); ok {
				c.closeWith(ce)
			}
			return cause
		case m := <-c.out:
			c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.writeQueued(m); err != nil {
				return err
			}
		case <-ping.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				return err
			}
		}
	}
}

// reconnect tells the client that the edge drains, within a second: what
// is still queued is dropped, and the client resumes every stream after the
// last cursor it got.
func (c *wsConn) reconnect() {
	deadline := time.Now().Add(time.Second)
	c.conn.SetWriteDeadline(deadline)
	if c.conn.WriteJSON(reconnectMessage(c.s.cfg.RetryHint)) != nil {
		return
	}
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "edge draining; resume elsewhere")
	c.conn.WriteControl(websocket.CloseMessage, msg, deadline)
}

// closeWith closes the connection of a client that broke the protocol with
// a close code and reason, and waits (a second at most) for the client's
// close while discarding what it still sends: closing a socket with unread
// data would reset it, and the client might lose the reason. The reader
// has returned, so reading here is safe.
func (c *wsConn) closeWith(ce *wsCloseError) {
	deadline := time.Now().Add(time.Second)
	msg := websocket.FormatCloseMessage(ce.code, ce.reason)
	if c.conn.WriteControl(websocket.CloseMessage, msg, deadline) != nil {
		return
	}
	c.conn.SetReadDeadline(deadline)
	for {
		if _, _, err := c.conn.NextReader(); err != nil {
			return
		}
	}
}

// writeQueued writes m and what was queued behind it when it was taken, one
// batch under one write deadline. Messages queued meanwhile wait for the
// next batch: a slow client that the streams keep feeding must still take
// each batch within writeTimeout, not the whole stream.
func (c *wsConn) writeQueued(m wsOut) error {
	for n := len(c.out); ; n-- {
		if err := c.conn.WriteJSON(m); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case m = <-c.out:
		default:
			return nil
		}
	}
}

// send queues a message, waiting while the queue is full: a slow client
// slows its own streams, whose followers then catch up from the log.
func (c *wsConn) send(ctx context.Context, m wsOut) error {
	select {
	case c.out <- m:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (c *wsConn) sendError(ctx context.Context, streamID string, e *wire.Error) error {
	if e.Cause != nil {
		c.s.log.Warn("websocket request failed", "stream_id", streamID, "code", e.Code, "reason", e.Message, "err", e.Cause)
	}
	obj := chat.ErrorOf(e)
	return c.send(ctx, wsOut{Type: "error", StreamID: streamID, Error: &obj})
}

// handle acts on one client message. It returns an error only when the
// connection is ending; a message that cannot be served is answered with
// an error message.
func (c *wsConn) handle(ctx context.Context, in wsIn) error {
	switch in.Type {
	case "start":
		if e := checkIdempotencyKey(in.IdempotencyKey, "idempotency_key"); e != nil {
			return c.sendError(ctx, "", e)
		}
		req, e := parseChatRequest(in.Request, c.s.limits(c.p))
		if e != nil {
			return c.sendError(ctx, "", e)
		}
		req.FailFast = c.failFast
		key, e := c.s.cursorKey(ctx)
		if e != nil {
			return c.sendError(ctx, "", e)
		}
		st, e := c.s.start(ctx, c.p.tenant, in.IdempotencyKey, req)
		if e != nil {
			return c.sendError(ctx, "", e)
		}
		token := c.s.tokens.issue(st.id, c.p.tenant)
		o := origin{stream: chat.Stream{ID: st.id, Meta: st.meta, Cursors: key}, f: st.f}
		if err := c.send(ctx, wsOut{Type: "started", StreamID: st.id, ResumeToken: token, Location: streamLocation(st.id), Replayed: st.replay}); err != nil {
			if o.f != nil {
				o.f.Close()
			}
			return err
		}
		return c.follow(ctx, o, !st.replay, folding{})
	case "resume":
		o, e := c.s.open(ctx, c.p.tenant, in.StreamID, "stream_id", in.After, "after")
		c.s.obs.resume(in.After, e)
		if e != nil {
			return c.sendError(ctx, in.StreamID, e)
		}
		if o.end != nil {
			return c.send(ctx, endMessage(o.stream, *o.end))
		}
		var p folding
		if in.Snapshot {
			through, e := c.s.snapshotThrough(ctx, o)
			if e != nil {
				o.f.Close()
				return c.sendError(ctx, in.StreamID, e)
			}
			p = newFolding(o.after, through)
		}
		return c.follow(ctx, o, false, p)
	default: // "cancel"
		// Waiting for the end takes up to cancelWait: not on the reader.
		c.streams.Go(func() { c.cancel(ctx, in.StreamID) })
		return nil
	}
}

// cancel cancels stream id and answers with a cancellation message.
func (c *wsConn) cancel(ctx context.Context, id string) {
	status, e := c.s.cancelAndWait(ctx, c.p.tenant, id, "stream_id")
	if e != nil {
		c.sendError(ctx, id, e)
		return
	}
	c.send(ctx, wsOut{Type: "cancellation", StreamID: id, Status: status})
}

// follow starts a goroutine that sends the stream's frames after o.after,
// those p folds as one chunk. started says the stream was started on this
// connection, so the disconnect policy applies to it.
func (c *wsConn) follow(ctx context.Context, o origin, started bool, p folding) error {
	id := o.stream.ID
	c.mu.Lock()
	if c.active[id] {
		c.mu.Unlock()
		if o.f != nil {
			o.f.Close()
		}
		e := invalid("stream_id", CodeStreamActive, "stream %s is already followed on this connection", id)
		e.Status = http.StatusConflict
		return c.sendError(ctx, id, e)
	}
	c.active[id] = true
	c.mu.Unlock()
	f, err := c.s.follow(o)
	if err != nil {
		c.inactive(id)
		return c.sendError(ctx, id, unavailable("following the stream", err))
	}
	c.streams.Go(func() {
		defer c.inactive(id)
		sess := c.s.obs.session(o.stream, o.after, metrics.TransportWebSocket, started, time.Now())
		defer sess.close()
		ended := c.pump(ctx, o.stream, f, sess, p)
		f.Close()
		if started && !ended && ctx.Err() != nil && !errors.Is(context.Cause(ctx), errShuttingDown) {
			c.s.orphans.watch(c.p.tenant, id, c.policy)
		}
	})
	return nil
}

func (c *wsConn) inactive(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.active, id)
}

// pump sends one stream's frames until its end frame or the connection
// ends, those p folds as one snapshot chunk; it reports whether the end
// frame was queued.
func (c *wsConn) pump(ctx context.Context, v chat.Stream, f *follow.Follower, sess *session, p folding) bool {
	var snap chat.Snapshot
	sendSnapshot := func() error {
		if snap.Empty() {
			return nil
		}
		chunk := v.SnapshotChunk(&snap)
		return c.send(ctx, wsOut{Type: "chunk", StreamID: v.ID, Cursor: v.Cursors.String(snap.At()), Chunk: &chunk})
	}
	for !f.Ended() {
		entries, err := f.Next(ctx, c.s.cfg.Keepalive)
		sess.delivered(entries)
		if len(entries) == 0 && p.finish() && sendSnapshot() != nil {
			return false
		}
		for _, e := range entries {
			fold, done := p.take(e)
			if fold {
				snap.Add(cursorOf(e), e.Frame)
			}
			if done && sendSnapshot() != nil || !fold && c.send(ctx, message(v, e)) != nil {
				return false
			}
		}
		if err != nil {
			if p.finish() && sendSnapshot() != nil {
				return false
			}
			if ctx.Err() == nil {
				c.s.log.Warn("stream interrupted", "stream_id", v.ID, "err", err)
				c.sendError(ctx, v.ID, interruptedError())
			}
			return false
		}
	}
	return true
}

// message renders a chunk or end frame.
func message(v chat.Stream, e chunklog.Entry) wsOut {
	if e.Frame.Kind == wire.KindEnd {
		return endMessage(v, e)
	}
	cursor := cursorOf(e)
	chunk := v.Chunk(cursor, &e.Frame)
	return wsOut{Type: "chunk", StreamID: v.ID, Cursor: v.Cursors.String(cursor), Chunk: &chunk}
}

func endMessage(v chat.Stream, e chunklog.Entry) wsOut {
	f := e.Frame
	m := wsOut{
		Type:     "end",
		StreamID: v.ID,
		Cursor:   v.Cursors.String(cursorOf(e)),
		Status:   f.Status,
		Attempts: f.Attempts,
		Cost:     f.Cost,
		Usage:    f.Usage,
	}
	if f.Status == wire.StatusDone {
		m.FinishReason = chat.FinishReason(f)
	} else {
		obj := chat.ErrorOf(chat.EndError(f))
		m.Error = &obj
	}
	return m
}
