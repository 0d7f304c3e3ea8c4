package ociimage_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// unpacked is an OCI archive read back the way a container runtime reads
// it, with nothing but the OCI layout's JSON and archive/tar, so the test
// does not trust the library that wrote it.
type unpacked struct {
	ref    string        // the index's ref.name annotation
	config v1.ConfigFile // the image configuration
	root   string        // the root file system, every layer applied
}

// unpackOCI reads the archive at path: it checks each blob against its
// digest, follows index.json to the manifest, the configuration and the
// layers, and extracts the layers in order into a new directory, with
// their modes and owners.
func unpackOCI(t *testing.T, path string) unpacked {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	walkTar(t, f, func(h *tar.Header, r io.Reader) {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	})
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", files["oci-layout"])
	}
	blob := func(d v1.Hash) []byte {
		t.Helper()
		b, ok := files["blobs/"+d.Algorithm+"/"+d.Hex]
		if !ok {
			t.Fatalf("blob %s missing", d)
		}
		sum := sha256.Sum256(b)
		if d.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != d.Hex {
			t.Fatalf("blob %s has digest sha256:%x", d, sum)
		}
		return b
	}
	var index v1.IndexManifest
	mustJSON(t, files["index.json"], &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	var manifest v1.Manifest
	mustJSON(t, blob(index.Manifests[0].Digest), &manifest)
	u := unpacked{ref: index.Manifests[0].Annotations["org.opencontainers.image.ref.name"], root: t.TempDir()}
	mustJSON(t, blob(manifest.Config.Digest), &u.config)
	if len(u.config.RootFS.DiffIDs) != len(manifest.Layers) {
		t.Fatalf("%d diff ids for %d layers", len(u.config.RootFS.DiffIDs), len(manifest.Layers))
	}
	for i, l := range manifest.Layers {
		diffID := extract(t, blob(l.Digest), u.root)
		if diffID != u.config.RootFS.DiffIDs[i].Hex {
			t.Fatalf("layer %d: uncompressed digest %s, config says %s", i, diffID, u.config.RootFS.DiffIDs[i])
		}
	}
	return u
}

// extract applies one gzip-compressed layer to root and returns the
// sha256 of its uncompressed tar (the diff id). The relay's layers hold
// directories and regular files only; anything else fails the test.
func extract(t *testing.T, layer []byte, root string) string {
	t.Helper()
	// gzip decompresses: compress/flate runs ten times slower under the
	// race detector, and the layers hold the whole binary.
	gz := exec.Command("gzip", "-dc")
	gz.Stdin = bytes.NewReader(layer)
	out, err := gz.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gz.Start(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	tee := io.TeeReader(out, sum)
	walkTar(t, tee, func(h *tar.Header, r io.Reader) {
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") || strings.HasPrefix(filepath.Base(name), ".wh.") {
			t.Fatalf("layer entry %q", h.Name)
		}
		p := filepath.Join(root, name)
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, err := io.Copy(io.Discard, tee); err != nil { // the tar's trailer
		t.Fatal(err)
	}
	if err := gz.Wait(); err != nil {
		t.Fatalf("gzip -dc: %v", err)
	}
	return fmt.Sprintf("%x", sum.Sum(nil))
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// walkTar calls fn with each entry of the tar r.
func walkTar(t *testing.T, r io.Reader, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}
