package edge

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/runners"
)

// TestRequestsRunOnRunners: a request's handler runs on a runner; a panic in it is raised on net/http's
// goroutine as before (http.ErrAbortHandler cuts the response quietly,
// any other is logged and cuts it), and the edge serves on.
func TestRequestsRunOnRunners(t *testing.T) {
	s := &Server{runners: runners.New(runners.Idle)}
	h := s.onRunners(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/panic":
			panic("boom")
		}
		buf := make([]byte, 64<<10)
		if stack := buf[:runtime.Stack(buf, false)]; !bytes.Contains(stack, []byte("runners.(*Pool).serve(")) {
			t.Errorf("served outside a runner:\n%s", stack)
		}
		io.WriteString(w, "ok")
	}))
	ts := httptest.NewUnstartedServer(h)
	var logged lockedBuffer
	ts.Config.ErrorLog = log.New(&logged, "", 0)
	ts.Start()
	defer ts.Close()

	get := func(path string) (string, error) {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	for _, path := range []string{"/abort", "/panic"} {
		if body, err := get(path); err == nil {
			t.Fatalf("%s: answered %q, want the response cut", path, body)
		}
	}
	for range 2 {
		if body, err := get("/"); err != nil || body != "ok" {
			t.Fatalf("after the panics: %q, %v", body, err)
		}
	}
	if got := logged.String(); !strings.Contains(got, "panic serving") || !strings.Contains(got, "boom") || strings.Count(got, "panic serving") != 1 {
		t.Fatalf("logged %q, want the one panic that was not an abort", got)
	}
}
