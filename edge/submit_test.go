package edge

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

func TestSubmitOverMaxPayloadIs413(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	// Under edge.max_body_bytes (1 MiB), over the server's max_payload
	// (1 MiB) once wrapped in a wire.Request.
	body := chatBody(true, strings.Repeat("x", DefaultMaxBodyBytes-200))
	if int64(len(body)) >= DefaultMaxBodyBytes || int64(len(body)) <= e.nc.MaxPayload()-publishHeadroom {
		t.Fatalf("body of %d bytes does not fall between the limits", len(body))
	}
	res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", body, nil)
	var got struct{ Error wire.Error }
	if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge ||
		got.Error.Code != CodeBodyTooLarge || !strings.Contains(got.Error.Message, "max_payload") {
		t.Fatalf("%d %+v %v", res.StatusCode, got, err)
	}
	kv, err := e.js.KeyValue(context.Background(), wire.MetaBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("a Meta was stored for a request never queued: %s", k)
	}
}
