package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/mockupstream"
)

// keysConfig writes a worker configuration with two providers of the
// fake upstream at url: "mixed" with a refused key and a good one, "good"
// with the good one alone.
func keysConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker.yaml")
	yaml := fmt.Sprintf(`providers:
  - name: mixed
    base_url: %[1]s/v1
    api_keys: [sk-bad, sk-good]
    models: [mock-1]
  - name: good
    type: anthropic
    base_url: %[1]s/v1
    api_keys: [sk-good]
    models: [mock-2]
`, url)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKeysCheckPrintsEveryKeyAndFailsOnARefusal(t *testing.T) {
	mock, err := mockupstream.New(mockupstream.Config{APIKeys: []string{"sk-good"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(mock.Handler())
	defer ts.Close()
	cfg := keysConfig(t, ts.URL)

	var out, errOut bytes.Buffer
	err = run([]string{"keys", "check", "--config", cfg}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 keys not verified") {
		t.Fatalf("err = %v, want one key of three not verified", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"mixed", "#0", apikeys.Fingerprint("sk-bad"), "failed: refused: HTTP 401 Unauthorized"},
		{"mixed", "#1", apikeys.Fingerprint("sk-good"), "ok"},
		{"good", "#0", apikeys.Fingerprint("sk-good"), "ok"},
	}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s\nwant %d lines", out.String(), len(want))
	}
	for i, fields := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != strings.Join(fields, " ") {
			t.Errorf("line %d = %q, want %q", i, got, strings.Join(fields, " "))
		}
	}
	if strings.Contains(out.String(), "sk-") {
		t.Errorf("a key was printed:\n%s", out.String())
	}

	out.Reset()
	if err := run([]string{"keys", "check", "--config", cfg, "--provider", "good"}, &out, &errOut); err != nil {
		t.Fatalf("--provider good: %v\n%s", err, out.String())
	}
	if got := strings.Fields(out.String()); len(got) != 4 || got[0] != "good" || got[3] != "ok" {
		t.Fatalf("--provider good printed %q", out.String())
	}
	if err := run([]string{"keys", "check", "--config", cfg, "--provider", "nope"}, &out, &errOut); err == nil {
		t.Fatal("an unknown provider was accepted")
	}
	if err := run([]string{"keys"}, &out, &errOut); err == nil {
		t.Fatal("relay keys without check succeeded")
	}
}
