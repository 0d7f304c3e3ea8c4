package procs

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the executables a Harness starts. Build makes them; tests
// that create several harnesses can build once and pass them in Options.
type Binaries struct {
	Relay      string // the relay binary (./relay/cmd/relay)
	NATSServer string // nats-server, built from the module's pinned dependency
}

// Build compiles the relay binary and nats-server into dir. moduleDir is the
// relay module's root; empty means the module of the working directory.
// nats-server is built from the version go.mod pins, so the benchmark and
// the tests run the server the roles were written against, without a
// download.
func Build(ctx context.Context, moduleDir, dir string) (Binaries, error) {
	if moduleDir == "" {
		var err error
		if moduleDir, err = findModule(ctx); err != nil {
			return Binaries{}, err
		}
	}
	b := Binaries{
		Relay:      filepath.Join(dir, "relay"),
		NATSServer: filepath.Join(dir, "nats-server"),
	}
	for _, target := range []struct{ out, pkg string }{
		{b.Relay, "./relay/cmd/relay"},
		{b.NATSServer, "github.com/nats-io/nats-server/v2"},
	} {
		if _, err := run(ctx, moduleDir, "go", "build", "-o", target.out, target.pkg); err != nil {
			return Binaries{}, fmt.Errorf("procs: build %s: %w", target.pkg, err)
		}
	}
	return b, nil
}

// findModule asks the go command for the go.mod of the working directory,
// so that tests (run in their package directory) and `go run` from the
// repository root both find the module.
func findModule(ctx context.Context) (string, error) {
	out, err := run(ctx, "", "go", "env", "GOMOD")
	if err != nil {
		return "", fmt.Errorf("procs: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("procs: not inside a Go module; set Options.ModuleDir")
	}
	return filepath.Dir(gomod), nil
}

func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
