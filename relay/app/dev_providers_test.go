package app_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if res.StatusCode != http.StatusOK || !strings.Contains(string(answer), "from the house model") || !strings.Contains(string(answer), "[DONE]") {
		t.Errorf("example request: %d %s; want the house provider's answer", res.StatusCode, answer)
	}
}
