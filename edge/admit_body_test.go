package edge

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// slowBody opens a real TCP connection to te and sends the headers of a
// chat completion with a 100-byte body, then one byte of it and nothing
// more, as a slow-body attacker does.
func slowBody(t *testing.T, te *testEdge) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := dialEdge(t, te) // admit_conn_limit_test.go
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// expectClosed reads what is left of c: nothing, and then the end.
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Fatalf("after the answer: %q, %v; want the connection closed", rest, err)
	}
}

func TestSlowBodyIsCutAfterBodyTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t)
	te := e.startEdge(Config{BodyTimeout: timeout})
	start := time.Now()
	_, br := slowBody(t, te)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got := decodeError(t, res); res.StatusCode != http.StatusRequestTimeout || got.Code != CodeRequestTimeout {
		t.Fatalf("status %d, error %+v; want 408 %s", res.StatusCode, got, CodeRequestTimeout)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("answered after %v; want just after the body timeout of %v", took, timeout)
	}
	expectClosed(t, br)
}

// A request without a valid key is refused on its headers: the 401 and
// the end of its connection do not wait for the body (edge.body_timeout,
// a minute here), so slow bodies without a key cannot hold the
// connection cap.
func TestSlowBodyWithoutKeyIsRefusedAtOnce(t *testing.T) {
	const timeout = time.Minute
	e := newEnv(t)
	te := e.startEdge(Config{BodyTimeout: timeout, APIKeys: []APIKey{{Tenant: "acme", KeySHA256: keyHash("k")}}})
	c, br := slowBody(t, te)
	// The deadline is a guard far below the body timeout: before the
	// refusal closed its connection, the answer waited out the timeout.
	c.SetReadDeadline(time.Now().Add(timeout / 4))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer before the body arrived: %v", err)
	}
	if res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Fatalf("status %d, close %v; want 401 and Connection: close", res.StatusCode, res.Close)
	}
	io.Copy(io.Discard, res.Body)
	expectClosed(t, br)
}

func TestStreamOutlivesBodyTimeout(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(5), pace: 100 * time.Millisecond})
	te := e.startEdge(Config{BodyTimeout: 50 * time.Millisecond})
	start := time.Now()
	res := do(t, http.MethodPost, te.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	body := readAll(t, res)
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("the stream took %v; the test needs it to outlast the body timeout", took)
	}
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "w5 ") || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Fatalf("status %d, body %q; want the whole stream", res.StatusCode, body)
	}
	awaitRunnersExited(t)
}

// awaitRunnersExited waits until no runner is left (relay/runners): one
// outlives the stream it served by runnerIdle, and the package's leak
// check would find it when the test is the last one run.
func awaitRunnersExited(t *testing.T) {
	t.Helper()
	const serve = "github.com/relaydev/relay/edge.(*runners).serve"
	waitFor(t, func() bool { return goroutinesIn(t, serve)[serve] == 0 })
}

// A GET that carries a body its handler never reads keeps the body's
// deadline on its connection; a stream served on it must outlive it.
func TestStreamWithUnreadBodyOutlivesBodyTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newEnv(t)
	te := e.startEdge(Config{BodyTimeout: timeout, Keepalive: 20 * time.Millisecond})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, answer(2)(wire.Request{})[:2]) // running: no end frame
	c := dialEdge(t, te)
	if _, err := io.WriteString(c, "GET /v1/streams/"+id+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v, %v", res, err)
	}
	start := time.Now()
	for time.Since(start) < 5*timeout {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("the stream ended after %v: %v; want it open past the body timeout of %v", time.Since(start), err, timeout)
		}
	}
	c.Close()
	awaitRunnersExited(t)
}
