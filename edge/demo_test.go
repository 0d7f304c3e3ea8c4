package edge

import (
	"net/http"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// detach starts a stream with POST /v1/streams and returns its id.
func detach(t *testing.T, edge *testEdge, h http.Header) string {
	t.Helper()
	res := do(t, http.MethodPost, edge.url+"/v1/streams", chatBody(true, "hi"), h)
	var got detached
	if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusAccepted || !wire.ValidStreamID(got.ID) {
		t.Fatalf("POST /v1/streams: %d %+v %v", res.StatusCode, got, err)
	}
	return got.ID
}

func TestDemoDropChecksTenant(t *testing.T) {
	e := newEnv(t)
	cfg := tenantConfig()
	cfg.Demo = true
	edge := e.startEdge(cfg)
	id := detach(t, edge, bearerHeader(keyAcme))

	res := do(t, http.MethodPost, edge.url+"/v1/streams/"+id+"/drop", "", bearerHeader(keyBeta))
	var got struct{ Error wire.Error }
	if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusNotFound || got.Error.Code != CodeStreamNotFound {
		t.Fatalf("another tenant's drop: %d %+v %v", res.StatusCode, got, err)
	}
	if res := do(t, http.MethodPost, edge.url+"/v1/streams/"+id+"/drop", "", bearerHeader(keyAcme)); res.StatusCode != http.StatusOK {
		t.Fatalf("the owner's drop: %d %s", res.StatusCode, readAll(t, res))
	}
}

func TestDemoDetachReleasesFollowers(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{Demo: true})
	for range 3 {
		detach(t, edge, nil)
	}
	// No client follows any of them: the edge holds no subscription, and
	// the dashboard's active streams are back to zero.
	waitFor(t, func() bool { return edge.hub.Streams() == 0 })
}
