package edge

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// # Slow request bodies
//
// http.Server.ReadTimeout would bound a request body, but it also bounds
// the whole connection's reads, and a streamed answer lasts minutes. So
// each request with a body gets a read deadline of its own
// (edge.body_timeout) through its ResponseController, and the deadline is
// lifted once the body has been read to its end: after that the server
// reads only to notice a client that hangs up, which must not time out. A
// client that sends its headers and a byte of body, then nothing, is cut
// when the deadline passes: a handler that answers without reading the
// body leaves the deadline on for the server's own drain of the unread
// body. A request without a valid key does not wait for it: its refusal
// closes the connection (admit_auth.go).

// CodeRequestTimeout answers a request whose body did not arrive within
// edge.body_timeout (408).
const CodeRequestTimeout = "request_timeout"

// errBodyTimeout is what a request body's Read returns once its deadline
// passed.
var errBodyTimeout = errors.New("edge: request body not received in time")

// withBodyDeadline sets the read deadline of every request that has a body.
func (s *Server) withBodyDeadline(next http.Handler) http.Handler {
	if s.cfg.BodyTimeout < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			// ErrNotSupported (a ResponseWriter of a test, or HTTP/2
			// without deadlines) leaves the body unbounded, as before.
			if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline at the body's end and
// reports a timeout as errBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	lift sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// The server's background read for a hang-up already runs with
		// the deadline; lifting it applies to that pending read too.
		b.lift.Do(func() { b.rc.SetReadDeadline(time.Time{}) })
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return n, errBodyTimeout
	}
	return n, err
}

// readBody reads a JSON request body of at most max bytes, or names why it
// could not: not declared JSON (415, admit_request.go), too large (413), too
// slow (408), or cut (400).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *wire.Error) {
	if e := checkJSONBody(r); e != nil {
		return nil, e
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		return body, nil
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		e := invalid("", CodeBodyTooLarge, "request body exceeds %d bytes", max)
		e.Status = http.StatusRequestEntityTooLarge
		return nil, e
	}
	if errors.Is(err, errBodyTimeout) {
		e := invalid("", CodeRequestTimeout, "the request body did not arrive in time")
		e.Status = http.StatusRequestTimeout
		return nil, e
	}
	return nil, invalid("", CodeInvalidJSON, "reading request body: %v", err)
}
