package ociimage_test

import (
	"bufio"
	"context"
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/ociimage"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// TestImageRuns builds the image with `make image`'s command (a static
// binary, the layers, an OCI archive), unpacks the archive, and runs the
// image's entry point from its root file system as its non-root user: `relay
// version` prints the version the image was built with, and the default
// command (`relay dev` with the fake upstream) serves one real streaming
// chat completion to the end and stops cleanly on SIGTERM.
func TestImageRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a cold build cache compiles everything
	defer cancel()
	// `make image`'s command, in a process of its own: compressing the
	// layers in this race-instrumented test would take ten times longer.
	archive := filepath.Join(t.TempDir(), "relay.tar")
	const version = "v0.0.0-imagetest"
	cmd := exec.CommandContext(ctx, "go", "run", "./relay/cmd/relay-image", "--out", archive,
		"--version", version, "--revision", "abc123", "--created", "1700000000")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("relay-image: %v\n%s", err, out)
	}
	u := unpackOCI(t, archive)

	if u.ref != "relay:"+version {
		t.Errorf("ref %q, want relay:%s", u.ref, version)
	}
	if u.config.Config.User != "65532:65532" || u.config.OS != "linux" || u.config.Architecture != runtime.GOARCH {
		t.Errorf("user %q, platform %s/%s", u.config.Config.User, u.config.OS, u.config.Architecture)
	}
	if l := u.config.Config.Labels; l["org.opencontainers.image.version"] != version || l["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("labels %v: want the version and revision built with", l)
	}
	checkRootFS(t, u)

	out, err := inImage(ctx, u, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "relay "+version {
		t.Fatalf("relay version: %q, %v", out, err)
	}

	// The default command, with free loopback ports so that it runs beside
	// anything else on the machine: a later --set wins.
	args := append(append([]string{}, u.config.Config.Cmd...),
		"--set", "edge.listen=127.0.0.1:0", "--set", "embedded_nats.listen=127.0.0.1:-1",
		"--set", "worker.listen=127.0.0.1:0", "--set", "coordinator.listen=127.0.0.1:0")
	dev := inImage(ctx, u, args...)
	var stderr strings.Builder
	dev.Stderr = &stderr
	line := readyLine(t, dev, "relay dev ready:", 2*time.Minute)
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() {
		if dev.ProcessState == nil {
			_ = dev.Process.Kill()
			<-exited
		}
	})
	edge := regexp.MustCompile(`edge (http://[0-9.:]+)`).FindStringSubmatch(line)
	if edge == nil {
		t.Fatalf("ready line %q names no edge", line)
	}
	streamOnce(t, ctx, edge[1])

	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("relay dev after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("relay dev did not stop within a minute of SIGTERM\n%s", stderr.String())
	}
	// It kept its JetStream files in the working directory, as its user.
	data, err := os.Stat(filepath.Join(u.root, ociimage.WorkDir, "data"))
	if err != nil {
		t.Fatalf("no JetStream files in the working directory: %v", err)
	}
	if st := data.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && st.Uid != ociimage.UID {
		t.Errorf("data owned by uid %d, want %d", st.Uid, ociimage.UID)
	}
}

// checkRootFS checks what the image's root file system must hold for a
// scratch image: a static binary, the relay user, CA certificates, a
// sticky world-writable /tmp and every example configuration.
func checkRootFS(t *testing.T, u unpacked) {
	t.Helper()
	f, err := elf.Open(filepath.Join(u.root, ociimage.Binary))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; a scratch image has no loader")
		}
	}
	passwd, err := os.ReadFile(filepath.Join(u.root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "relay:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q, %v", passwd, err)
	}
	if st, err := os.Stat(filepath.Join(u.root, ociimage.CABundle)); err != nil || st.Size() < 1000 {
		t.Errorf("CA bundle: %v", err)
	}
	if st, err := os.Stat(filepath.Join(u.root, "tmp")); err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp: %v, %v", st.Mode(), err)
	}
	configs, _ := filepath.Glob(filepath.Join(repoRoot, "configs", "*.yaml"))
	for _, c := range configs {
		if _, err := os.Stat(filepath.Join(u.root, ociimage.ConfigDir, filepath.Base(c))); err != nil {
			t.Errorf("example config: %v", err)
		}
	}
}

// streamOnce makes one streaming chat completion and reads it to the
// end: several content chunks, then [DONE].
func streamOnce(t *testing.T, ctx context.Context, edge string) {
	t.Helper()
	body := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"Hello from the image"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edge+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	chunks, done := 0, false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		switch l := sc.Text(); {
		case l == "data: [DONE]":
			done = true
		case strings.HasPrefix(l, "data: ") && strings.Contains(l, `"content"`):
			chunks++
		}
	}
	if !done || chunks < 2 {
		t.Fatalf("stream: %d content chunks, done=%v (%v)", chunks, done, sc.Err())
	}
}

// writeImage builds the image of o and writes its OCI archive to path.
func writeImage(t *testing.T, o ociimage.Options, path string) {
	t.Helper()
	img, err := ociimage.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ociimage.WriteOCI(f, img, "relay:"+o.Version, o.Created); err != nil {
		t.Fatal(err)
	}
}
