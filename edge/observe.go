package edge

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// observer is what the edge sees of itself: its Prometheus families, the
// dashboard's recent history, and one log line per client session.
type observer struct {
	m        *metrics.Edge
	gatherer prometheus.Gatherer
	log      *slog.Logger
	models   func(string) bool
	recent   *recent
	workers  *workerBoard
	health   *fleet.HealthBoard
	drops    *drops
	// ended is Server.generationEnded: told when a client is sent a
	// stream's end frame.
	ended func(id string, end *wire.Frame)
}

// newObserver registers the edge's metrics with deps.Registerer (nil: a
// registry of its own, which /metrics then serves). s must have its hub
// and clients.
func newObserver(s *Server, deps Deps) (*observer, error) {
	reg, gatherer := deps.Registerer, deps.Gatherer
	if reg == nil {
		own := prometheus.NewRegistry()
		reg = own
		if gatherer == nil {
			gatherer = own
		}
	}
	if gatherer == nil {
		gatherer, _ = reg.(prometheus.Gatherer)
	}
	m, err := metrics.NewEdge(reg, edgeState{s})
	if err != nil {
		return nil, err
	}
	return &observer{
		m:        m,
		gatherer: gatherer,
		log:      s.log,
		models:   s.catalog.Serves,
		recent:   newRecent(time.Now),
		workers:  newWorkerBoard(s.nc, s.log),
		health:   &fleet.HealthBoard{},
		drops:    newDrops(),
		ended:    s.generationEnded,
	}, nil
}

// edgeState reads the numbers the edge keeps anyway at scrape time.
type edgeState struct{ s *Server }

func (e edgeState) ActiveStreams() int { return e.s.hub.Streams() }

func (e edgeState) ActiveClients(t metrics.Transport) int {
	switch t {
	case metrics.TransportSSE:
		return e.s.clients.count(clientSSE)
	case metrics.TransportWebSocket:
		return e.s.clients.count(clientWS)
	case metrics.TransportCompletion:
		return e.s.clients.count(clientUnary)
	}
	return 0
}

func (e edgeState) SequenceGaps() uint64 { return e.s.hub.Stats().Gaps }

func (e edgeState) CatchUps(why metrics.CatchUp) uint64 {
	switch why {
	case metrics.CatchUpWoken:
		return e.s.hub.Stats().Woken
	case metrics.CatchUpIdle:
		return e.s.hub.Stats().Idle
	}
	return 0
}

func (e edgeState) LiveDropped() uint64 { return e.s.hub.Stats().Dropped }

// acceptedKey holds the time the edge received a request in its context.
type acceptedKey struct{}

// errDropped ends a client's response on POST /v1/streams/{id}/drop.
var errDropped = errors.New("edge: connection dropped on request (demo)")

// instrument counts every request by the route pattern it matched (routed
// records it) and its outcome, and records when it arrived. It wraps
// everything, authentication included, so refusals are counted too (as
// route "none" when refused before routing). With the demo on, it also
// makes each GET /v1/streams/{id} droppable.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := new(string)
		ctx := context.WithValue(r.Context(), acceptedKey{}, time.Now())
		ctx = context.WithValue(ctx, routeKey{}, route)
		if s.cfg.Demo && r.Method == http.MethodGet {
			if id, ok := strings.CutPrefix(r.URL.Path, "/v1/streams/"); ok && wire.ValidStreamID(id) {
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(ctx)
				defer s.obs.drops.add(id, cancel)()
			}
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		s.obs.m.Request(*route, metrics.OutcomeOf(rec.status))
		switch {
		case rec.err == nil:
		case rec.err.Cause != nil:
			// The edge's own failure: the client was told what failed for
			// it, the log says why. The path only: a query can hold a
			// resume token.
			s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"code", rec.err.Code, "reason", rec.err.Message, "err", rec.err.Cause)
		case rec.status >= 400 && rec.status <= 499:
			// The client's mistakes are not the edge's warnings, but an
			// operator debugging a client wants to see them.
			s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"code", rec.err.Code, "param", rec.err.Param, "reason", rec.err.Message)
		}
	})
}

// routeKey holds a *string in a request's context, where routed writes
// the pattern the request matched.
type routeKey struct{}

// routed serves a mux and records the matched pattern for instrument.
type routed struct{ mux *http.ServeMux }

func (h routed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
	if p, ok := r.Context().Value(routeKey{}).(*string); ok {
		*p = r.Pattern
	}
}

// accepted is when the edge received r.
func accepted(r *http.Request) time.Time {
	if t, ok := r.Context().Value(acceptedKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// statusRecorder remembers the status of a response. It passes Flush,
// Hijack and the ResponseController's methods (through Unwrap) on.
type statusRecorder struct {
	http.ResponseWriter
	status int
	// err is the error the response answered with (writeError), if any.
	err *wire.Error
}

// noteError records e as w's error, if w is (or wraps) a statusRecorder.
func noteError(w http.ResponseWriter, e *wire.Error) {
	for {
		switch rw := w.(type) {
		case *statusRecorder:
			rw.err = e
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = rw.Unwrap()
		default:
			return
		}
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack is what a WebSocket upgrade needs (gorilla asserts http.Hijacker);
// the upgrade counts as ok.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.status = http.StatusSwitchingProtocols
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// resume counts a request that carried a cursor (empty: it did not), by
// how it was answered.
func (o *observer) resume(cursor string, e *wire.Error) {
	if cursor == "" {
		return
	}
	status := 0
	if e != nil {
		status = statusOf(e, http.StatusInternalServerError)
	}
	o.m.Resume(metrics.ResumeOutcomeOf(status))
}

// session is one client's view of one stream on this edge, from the first
// frame it was sent to the moment it left: the unit of the edge's metrics
// and of its "client session ended" log line. It is used by one goroutine.
type session struct {
	o         *observer
	id        string
	meta      wire.Meta
	transport metrics.Transport
	// fresh: the session started the stream (POST, WebSocket start), so its
	// time to first token is the stream's.
	fresh    bool
	accepted time.Time
	after    wire.Cursor

	first, last time.Time
	chunks      int
	end         *wire.Frame
	// span is the request's span, held open until close (tracing.go).
	span *requestSpan
}

// session starts observing a client of stream o.stream from o.after. fresh
// says the client started the stream, at accepted.
func (o *observer) session(v chat.Stream, after wire.Cursor, t metrics.Transport, fresh bool, accepted time.Time) *session {
	if fresh {
		o.recent.streamStarted()
	}
	return &session{o: o, id: v.ID, meta: v.Meta, transport: t, fresh: fresh, accepted: accepted, after: after}
}

// sseSession observes an SSE or "stream": false client of r.
func (s *Server) sseSession(r *http.Request, o origin, t metrics.Transport) *session {
	ss := s.obs.session(o.stream, o.after, t, r.Method == http.MethodPost, accepted(r))
	ss.span = holdSpan(r, o.stream.ID)
	return ss
}

func (ss *session) resumed() bool { return !ss.after.IsZero() }

// delivered records frames handed to the client.
func (ss *session) delivered(entries []chunklog.Entry) {
	n := 0
	var upstream time.Duration
	for i := range entries {
		f := &entries[i].Frame
		switch f.Kind {
		case wire.KindChunk:
			n++
			if f.Seq == 1 {
				upstream = time.Duration(f.UpstreamTTFTMS) * time.Millisecond
			}
		case wire.KindEnd:
			// A copy: the batch goes back to the pool (release).
			end := *f
			f = &end
			ss.end = f
			ss.o.recent.ended(ss.id, ss.model(), f.Cost)
			ss.span.linkEnd(f)
			ss.o.ended(ss.id, f)
		}
	}

	if n == 0 {
		return
	}
	now := time.Now()
	if ss.first.IsZero() {
		ss.first = now
		if ss.fresh && ss.transport != metrics.TransportCompletion {
			ttft := now.Sub(ss.accepted)
			ss.o.m.TTFT(ttft, upstream)
			ss.o.recent.ttft(ttft)
		}
	} else {
		ss.o.m.InterChunk(now.Sub(ss.last))
	}
	ss.last = now
	ss.chunks += n
	ss.o.m.Delivered(ss.transport, n, ss.resumed())
	ss.o.recent.delivered(n)
}

// model is the model the client asked for, if the edge serves it.
func (ss *session) model() string {
	if ss.o.models(ss.meta.Model) {
		return ss.meta.Model
	}
	return metrics.Other
}

// close logs the session's line and counts what it delivered because the
// client resumed.
func (ss *session) close() {
	// Room for every attribute, so that the line is not grown as it is
	// built: one is logged per client session.
	var room [11]slog.Attr
	attrs := append(room[:0],
		slog.String("stream_id", ss.id),
		slog.String("tenant", ss.meta.Tenant),
		slog.String("transport", string(ss.transport)),
		slog.Bool("resumed", ss.resumed()),
		slog.Int("chunks", ss.chunks),
		slog.Bool("ended", ss.end != nil),
	)
	if ss.resumed() {
		attrs = append(attrs, slog.Uint64("after_seq", ss.after.Seq), slog.Uint64("after_jsseq", ss.after.JSSeq))
	}
	if ss.end != nil {
		attrs = append(attrs, slog.String("status", string(ss.end.Status)))
		if ss.resumed() && ss.end.Usage != nil && ss.end.Seq > 1 {
			ss.o.m.ResumedTokens(float64(ss.end.Usage.CompletionTokens) * float64(ss.chunks) / float64(ss.end.Seq-1))
		}
	}
	if ss.fresh && !ss.first.IsZero() && ss.transport != metrics.TransportCompletion {
		attrs = append(attrs, slog.Duration("ttft", ss.first.Sub(ss.accepted)))
	}
	attrs = append(attrs, slog.Duration("duration", time.Since(ss.accepted)))
	ss.o.log.LogAttrs(context.Background(), slog.LevelInfo, "client session ended", attrs...)
	ss.span.release()
}

// drops holds a cancel function per droppable GET /v1/streams/{id}
// response (demo only), so that POST /v1/streams/{id}/drop can end them
// as a broken connection would, and the browser's EventSource reconnects
// with Last-Event-ID.
type drops struct {
	mu   sync.Mutex
	byID map[string]map[*context.CancelCauseFunc]struct{}
}

func newDrops() *drops { return &drops{byID: map[string]map[*context.CancelCauseFunc]struct{}{}} }

// add registers cancel under id until the returned function is called.
func (d *drops) add(id string, cancel context.CancelCauseFunc) func() {
	key := &cancel
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID[id] == nil {
		d.byID[id] = map[*context.CancelCauseFunc]struct{}{}
	}
	d.byID[id][key] = struct{}{}
	return func() {
		cancel(nil)
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.byID[id], key)
		if len(d.byID[id]) == 0 {
			delete(d.byID, id)
		}
	}
}

// drop ends every registered response of id and says how many.
func (d *drops) drop(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for cancel := range d.byID[id] {
		(*cancel)(errDropped)
	}
	return len(d.byID[id])
}
