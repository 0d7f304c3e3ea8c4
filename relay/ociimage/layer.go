package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	path     string // absolute, as in the image
	mode     int64  // permission bits (and sticky), no type bits
	uid, gid int
	dir      bool
	data     []byte
}

// layerFiles is the content of one layer. Every entry gets the same
// modification time, and entries are written sorted with their parent
// directories first, so the same inputs make the same digest.
type layerFiles struct {
	entries map[string]entry
}

func newLayerFiles() *layerFiles { return &layerFiles{entries: map[string]entry{}} }

// dir adds a directory and any missing parent (root-owned, 0755).
func (l *layerFiles) dir(p string, mode int64, uid, gid int) {
	if parent := path.Dir(p); parent != "/" {
		if _, ok := l.entries[parent]; !ok {
			l.dir(parent, 0o755, 0, 0)
		}
	}
	l.entries[p] = entry{path: p, mode: mode, uid: uid, gid: gid, dir: true}
}

// file adds a root-owned file and its parent directories.
func (l *layerFiles) file(p string, mode int64, data []byte) {
	if parent := path.Dir(p); parent != "/" {
		if _, ok := l.entries[parent]; !ok {
			l.dir(parent, 0o755, 0, 0)
		}
	}
	l.entries[p] = entry{path: p, mode: mode, data: data}
}

// tar writes the layer as an uncompressed tar whose member names are
// relative ("etc/passwd"), as image layers have them.
func (l *layerFiles) tar(mtime time.Time) ([]byte, error) {
	paths := make([]string, 0, len(l.entries))
	for p := range l.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths) // a parent sorts before its children
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := l.entries[p]
		h := &tar.Header{Name: p[1:], Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: tar %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("ociimage: tar %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: tar: %w", err)
	}
	return buf.Bytes(), nil
}

// layer is the files as an OCI layer (gzip-compressed tar). It is
// compressed once, here: given an uncompressed tar, the layer would
// compress it again for its digest, its size and its content.
func (l *layerFiles) layer(mtime time.Time) (v1.Layer, error) {
	b, err := l.tar(mtime)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("ociimage: compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: compress: %w", err)
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
}
