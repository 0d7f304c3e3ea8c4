package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/app"
)

// `relay dev` with providers configured serves them and not the fake
// upstream, and names a model they serve for the ready line's example
// request, which then streams that provider's answer.
func TestDevWithProvidersServesThemOnly(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"from the house model"}}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer provider.Close()
	file := filepath.Join(t.TempDir(), "dev.yaml")
	yaml := fmt.Sprintf("providers:\n  - name: house\n    base_url: %s/v1\n    models: [house-model, house-mini]\n", provider.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := startDev(t, file)
	if addrs.MockUpstream != "" || addrs.Model != "house-model" {
		t.Fatalf("dev serves fake upstream %q and names model %q; want none and house-model", addrs.MockUpstream, addrs.Model)
	}

	client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	res, answer := askHello(t, client, addrs)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(answer), "from the house model") || !strings.Contains(string(answer), "[DONE]") {
		t.Errorf("example request: %d %s; want the house provider's answer", res.StatusCode, answer)
	}
}

// `relay dev` with no providers calls its fake upstream over h2c, and an
// answer streams through it whole.
func TestDevCallsItsFakeUpstreamOverH2C(t *testing.T) {
	addrs := startDev(t, "")
	client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	res, answer := askHello(t, client, addrs)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(answer), "[DONE]") {
		t.Fatalf("stream: %d\n%s", res.StatusCode, answer)
	}
	status, _, stats := fetch(client, "http://"+addrs.MockUpstream+"/mock/stats")
	var s struct {
		ByProtocol map[string]int `json:"by_protocol"`
	}
	if err := json.Unmarshal([]byte(stats), &s); err != nil || status != http.StatusOK {
		t.Fatalf("GET /mock/stats: %d %v", status, err)
	}
	if s.ByProtocol["HTTP/2.0"] == 0 || s.ByProtocol["HTTP/1.1"] != 0 {
		t.Fatalf("the fake upstream's requests by protocol: %v; want every one over HTTP/2", s.ByProtocol)
	}
}

// askHello streams "Hello" to the model dev names through its edge and
// returns the response with its whole body.
func askHello(t *testing.T, client *http.Client, addrs app.Addrs) (*http.Response, []byte) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"Hello"}]}`, addrs.Model)
	res, err := client.Post("http://"+addrs.Edge+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, answer
}
