package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// `relay keys check` as an operator runs it before a rotation: one line
// per key, by fingerprint, and an exit status that stops a script when a
// key is refused.
func TestKeysCheckCommand(t *testing.T) {
	t.Parallel()
	bin := processBinaries(t)
	mock, err := mockupstream.New(mockupstream.Config{APIKeys: []string{"sk-live"}}, relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(mock.Handler())
	t.Cleanup(ts.Close)
	cfg := filepath.Join(t.TempDir(), "worker.yaml")
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeKeyFile(t, keyFile, "sk-revoked\nsk-live")
	yaml := fmt.Sprintf(`providers:
  - name: rotating
    base_url: %[1]s/v1
    api_keys_file: %[2]s
    models: [mock-1]
  - name: claude
    type: anthropic
    base_url: %[1]s/v1
    api_keys: [sk-live]
    models: [mock-2]
`, ts.URL, keyFile)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	keysCheck := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin.Relay, append([]string{"keys", "check", "--config", cfg}, args...)...)
		// No RELAY_ variable of the test's environment applies.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}

	out, errOut, code := keysCheck()
	if code != 1 || !strings.Contains(errOut, "1 of 3 keys not verified") {
		t.Fatalf("exit %d, stderr %q; want 1, one key of three not verified", code, errOut)
	}
	want := []string{
		"rotating #0 " + apikeys.Fingerprint("sk-revoked") + " failed: refused: HTTP 401 Unauthorized",
		"rotating #1 " + apikeys.Fingerprint("sk-live") + " ok",
		"claude #0 " + apikeys.Fingerprint("sk-live") + " ok",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
	if strings.Contains(out+errOut, "sk-") {
		t.Errorf("a key was printed:\n%s%s", out, errOut)
	}

	writeKeyFile(t, keyFile, "sk-live")
	if out, errOut, code := keysCheck("--provider", "rotating"); code != 0 || strings.Count(out, " ok") != 1 {
		t.Fatalf("after the fix: exit %d, stdout %q, stderr %q; want 0 and one key ok", code, out, errOut)
	}
	if st := mock.Stats(); len(st.ByKey) != 0 {
		t.Fatalf("the check sent traffic: %v", st.ByKey)
	}
}
