package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteOCI writes img as an OCI image layout packed in one tar (what
// `docker load`, `podman load` and `skopeo copy oci-archive:` read),
// naming it ref ("relay:v1.2.3"). Writing the tar directly, rather than
// a layout directory that is then packed, keeps the blobs out of the
// file system.
func WriteOCI(w io.Writer, img v1.Image, ref string, mtime time.Time) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("ociimage: manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("ociimage: manifest: %w", err)
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    digest,
			// ref.name is what podman and skopeo tag it with; Docker and
			// containerd read io.containerd.image.name.
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": ref,
				"io.containerd.image.name":          ref,
			},
		}},
	})
	if err != nil {
		return err
	}
	blobs, err := contentBlobs(img)
	if err != nil {
		return err
	}
	files := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": index}
	blobs[digest] = manifest
	var names []string
	for d, b := range blobs {
		files[blobPath(d)] = b
		names = append(names, blobPath(d))
	}
	slices.Sort(names) // the same image, the same archive
	names = append([]string{"oci-layout", "index.json"}, names...)
	tw := tar.NewWriter(w)
	for _, name := range names {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), ModTime: mtime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("ociimage: write %s: %w", name, err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			return fmt.Errorf("ociimage: write %s: %w", name, err)
		}
	}
	return tw.Close()
}

func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// contentBlobs are the image's configuration and compressed layers, by
// digest; they are held in memory (the relay's are a few MiB).
func contentBlobs(img v1.Image) (map[v1.Hash][]byte, error) {
	blobs := map[v1.Hash][]byte{}
	name, err := img.ConfigName()
	if err == nil {
		blobs[name], err = img.RawConfigFile()
	}
	if err != nil {
		return nil, fmt.Errorf("ociimage: config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("ociimage: layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
		blobs[d], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
	}
	return blobs, nil
}
