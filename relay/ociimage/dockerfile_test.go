package ociimage_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/ociimage"
)

// TestDockerfileMatchesImage holds configs/docker/Dockerfile to the image
// the Go builder makes (relay/ociimage), read back from its OCI archive:
// the same base (scratch), user, working directory, entry point, command,
// exposed ports, stop signal and labels (built with the same version and
// revision), no environment in either; the builder stage compiles as
// Compile does, from the Go version go.mod names, and adds the same
// files. The image's configuration does not depend on the binary, so a
// stand-in is packed.
func TestDockerfileMatchesImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "relay")
	if err := os.WriteFile(bin, []byte("stand-in"), 0o755); err != nil {
		t.Fatal(err)
	}
	const version, revision = "v1.2.3", "0123abcd"
	archive := filepath.Join(dir, "relay.tar")
	writeImage(t, ociimage.Options{RepoRoot: repoRoot, Binary: bin, Arch: runtime.GOARCH, Version: version, Revision: revision, Created: time.Unix(0, 0)}, archive)
	img := unpackOCI(t, archive).config.Config

	stages := parseDockerfile(t, filepath.Join(repoRoot, "configs", "docker", "Dockerfile"),
		map[string]string{"VERSION": version, "REVISION": revision})
	if len(stages) != 2 {
		t.Fatalf("%d stages, want the builder and the final one", len(stages))
	}
	build, final := stages[0], stages[1]

	if final.from != "scratch" {
		t.Errorf("final stage FROM %s, the Go builder builds FROM scratch", final.from)
	}
	for _, c := range []struct{ what, dockerfile, image string }{
		{"USER", final.last("USER"), img.User},
		{"WORKDIR", final.last("WORKDIR"), img.WorkingDir},
		{"STOPSIGNAL", final.last("STOPSIGNAL"), img.StopSignal},
	} {
		if c.dockerfile != c.image {
			t.Errorf("%s: Dockerfile %q, image %q", c.what, c.dockerfile, c.image)
		}
	}
	if got := execForm(t, "ENTRYPOINT", final.last("ENTRYPOINT")); !slices.Equal(got, img.Entrypoint) {
		t.Errorf("ENTRYPOINT: Dockerfile %q, image %q", got, img.Entrypoint)
	}
	if got := execForm(t, "CMD", final.last("CMD")); !slices.Equal(got, img.Cmd) {
		t.Errorf("CMD: Dockerfile %q, image %q", got, img.Cmd)
	}
	ports := strings.Fields(strings.Join(final.all("EXPOSE"), " "))
	if want := slices.Sorted(maps.Keys(img.ExposedPorts)); !slices.Equal(slices.Sorted(slices.Values(ports)), want) {
		t.Errorf("EXPOSE: Dockerfile %v, image %v", ports, want)
	}
	if got := labels(t, final.all("LABEL")); !maps.Equal(got, img.Labels) {
		t.Errorf("LABEL: Dockerfile %v\nimage %v", got, img.Labels)
	}
	if len(final.all("ENV")) != 0 || len(img.Env) != 0 {
		t.Errorf("ENV: Dockerfile %v, image %v; neither should set any", final.all("ENV"), img.Env)
	}
	// The working directory is the relay user's in both.
	if chown := strings.Join(final.all("COPY"), "\n"); !strings.Contains(chown, "--chown="+img.User+" /workdir/ "+img.WorkingDir+"/") {
		t.Errorf("the Dockerfile does not hand %s to %s:\n%s", img.WorkingDir, img.User, chown)
	}

	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil || build.from != "golang:"+string(goVersion[1]) {
		t.Errorf("builder FROM %s, want golang:<go.mod's go directive> (%s)", build.from, goVersion)
	}
	script := strings.Join(build.all("RUN"), "\n")
	for _, want := range []string{
		"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=` + version + `"`,
		"-o /rootfs" + ociimage.Binary + " ./relay/cmd/relay",
		"configs/docker/rootfs/. /rootfs/", "configs/*.yaml /rootfs" + ociimage.ConfigDir + "/",
		ociimage.CABundle + " /rootfs" + filepath.Dir(ociimage.CABundle) + "/", "chmod 1777 /rootfs/tmp",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the builder stage does not run %q, as the Go builder does", want)
		}
	}
}
