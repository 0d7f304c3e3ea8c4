package ociimage

import (
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what goes into an image.
type Options struct {
	// RepoRoot is the repository's root: configs/ is read from it.
	RepoRoot string
	// Binary is the path of a static linux relay binary (Compile).
	Binary string
	// Arch is its GOARCH, the image's architecture.
	Arch string
	// CAFile is the CA bundle to ship; empty: the build machine's
	// /etc/ssl/certs/ca-certificates.crt.
	CAFile string
	// Version and Revision go into the labels (Labels).
	Version, Revision string
	// Created is the image's creation time and every file's modification
	// time; the commit's time keeps a rebuild of the same commit identical.
	Created time.Time
}

// Build assembles the image: the base and app layers on scratch, and the
// configuration of Spec.
func Build(o Options) (v1.Image, error) {
	if o.CAFile == "" {
		o.CAFile = CABundle
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("ociimage: binary: %w", err)
	}
	base, err := baseFiles(o.RepoRoot, o.CAFile)
	if err != nil {
		return nil, err
	}
	app, err := appFiles(o.RepoRoot, bin)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created.UTC()}
	cf.Config = imageConfig(o.Version, o.Revision)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("ociimage: config: %w", err)
	}
	for _, part := range []struct {
		files *layerFiles
		why   string
	}{{base, "relay base: user, CA bundle, /tmp, " + WorkDir}, {app, "relay binary and example configs"}} {
		layer, err := part.files.layer(o.Created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: o.Created.UTC()}, CreatedBy: "relay-image: " + part.why,
		}})
		if err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
	}
	return img, nil
}

// imageConfig is the runtime configuration every relay image carries.
func imageConfig(version, revision string) v1.Config {
	ports := map[string]struct{}{}
	for _, p := range Ports {
		ports[p] = struct{}{}
	}
	return v1.Config{
		User:         User,
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		WorkingDir:   WorkDir,
		ExposedPorts: ports,
		Labels:       Labels(version, revision),
		StopSignal:   StopSignal,
	}
}
