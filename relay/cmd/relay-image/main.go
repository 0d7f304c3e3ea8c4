// Command relay-image builds the relay's container image without a Docker
// daemon (`make image`): it compiles a static relay binary and writes an
// OCI image archive (package relay/ociimage), which `docker load`,
// `podman load` or `skopeo copy oci-archive:` import.
//
//	go run ./relay/cmd/relay-image --out bin/relay-image.tar --version v1.2.3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/relaydev/relay/relay/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "relay-image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/relay-image.tar", "the OCI archive to write")
	repo := flag.String("repo", ".", "the repository's root")
	version := flag.String("version", "dev", "the version: binary, label and tag")
	revision := flag.String("revision", "", "the commit, for the revision label")
	created := flag.String("created", "0", "creation time as Unix seconds (the commit's: `git log -1 --format=%ct`), for a reproducible image")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the image")
	ca := flag.String("ca-file", ociimage.CABundle, "CA bundle to ship")
	flag.Parse()
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	tmp, err := os.MkdirTemp("", "relay-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "relay")
	if err := ociimage.Compile(ctx, *repo, bin, *arch, *version); err != nil {
		return err
	}
	when := time.Unix(secs, 0)
	img, err := ociimage.Build(ociimage.Options{RepoRoot: *repo, Binary: bin, Arch: *arch, CAFile: *ca,
		Version: *version, Revision: *revision, Created: when})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := ociimage.WriteOCI(f, img, "relay:"+*version, when); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("relay-image: wrote %s (relay:%s, %s)\n", *out, *version, digest)
	return nil
}
