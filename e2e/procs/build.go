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
// relay module's root; empty means the one the working directory's module
// resolves.
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

// findModule asks the go command where the relay's module is, as the
// module of the working directory (the tests' own, which replaces it with
// the repository's) resolves it.
func findModule(ctx context.Context) (string, error) {
	out, err := run(ctx, "", "go", "list", "-m", "-f", "{{.Dir}}", "github.com/relaydev/relay")
	if err != nil {
		return "", fmt.Errorf("procs: go list -m github.com/relaydev/relay: %w; set Options.ModuleDir", err)
	}
	return strings.TrimSpace(out), nil
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
