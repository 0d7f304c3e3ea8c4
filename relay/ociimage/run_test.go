package ociimage_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/ociimage"
)

// inImage is a command of the unpacked image, run as a container runtime
// would run it: as root, chrooted into the image's root file system as the
// image's user, in its working directory, with an empty environment. Not
// as root, chroot is not allowed: then the binary runs from the unpacked
// tree, with the image's paths in its arguments moved under the tree and
// the working directory's copy as its own.
func inImage(ctx context.Context, u unpacked, args ...string) *exec.Cmd {
	cfg := u.config.Config
	argv := append(append([]string{}, cfg.Entrypoint...), args...)
	if os.Geteuid() != 0 {
		for i, a := range argv {
			if strings.HasPrefix(a, "/") {
				argv[i] = filepath.Join(u.root, a)
			}
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = filepath.Join(u.root, cfg.WorkingDir), []string{}
		return cmd
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = cfg.WorkingDir, []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     u.root,
		Credential: &syscall.Credential{Uid: ociimage.UID, Gid: ociimage.GID},
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}

// readyLine starts cmd and returns the first line of its standard output
// that starts with prefix; the test fails if none comes within wait.
func readyLine(t *testing.T, cmd *exec.Cmd, prefix string, wait time.Duration) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				lines <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%v: exited without %q", cmd.Args, prefix)
		}
		return l
	case <-time.After(wait):
		t.Fatalf("%v: no %q within %v", cmd.Args, prefix, wait)
		return ""
	}
}
