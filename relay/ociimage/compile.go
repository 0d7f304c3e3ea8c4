package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Compile builds the relay binary for linux/arch into out, statically
// (CGO_ENABLED=0: a scratch image has no libc), without local paths
// (-trimpath) or symbol tables (-s -w), with version set as `make build`
// sets it.
func Compile(ctx context.Context, repoRoot, out, arch, version string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+version,
		"-o", out, "./relay/cmd/relay")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ociimage: go build: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
