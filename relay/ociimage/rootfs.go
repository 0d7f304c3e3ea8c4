package ociimage

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// baseFiles is the layer every relay image starts from, in place of a
// base image that cannot be pulled here: the files of
// configs/docker/rootfs (the relay user and group), the CA bundle, a
// world-writable /tmp and the relay user's working directory.
func baseFiles(repoRoot, caFile string) (*layerFiles, error) {
	l := newLayerFiles()
	root := filepath.Join(repoRoot, "configs", "docker", "rootfs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		l.file("/"+filepath.ToSlash(rel), 0o644, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: rootfs: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ociimage: CA bundle: %w", err)
	}
	l.file(CABundle, 0o644, ca)
	l.dir("/tmp", 0o1777, 0, 0)
	l.dir(WorkDir, 0o755, UID, GID)
	return l, nil
}

// appFiles is the layer of the relay itself: the binary and the example
// configuration of each role (configs/*.yaml), which the roles are
// started with (`edge --config /etc/relay/edge.yaml`).
func appFiles(repoRoot string, binary []byte) (*layerFiles, error) {
	l := newLayerFiles()
	l.file(Binary, 0o755, binary)
	configs, err := filepath.Glob(filepath.Join(repoRoot, "configs", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(configs) == 0 {
		return nil, fmt.Errorf("ociimage: no configs/*.yaml under %s", repoRoot)
	}
	for _, c := range configs {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("ociimage: config: %w", err)
		}
		l.file(path.Join(ConfigDir, filepath.Base(c)), 0o644, b)
	}
	return l, nil
}
