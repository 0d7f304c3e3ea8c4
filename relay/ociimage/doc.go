// Package ociimage builds the relay's container image without a Docker
// daemon: the machines that build and test the relay have none, and an
// image made by a program can be unpacked and run by a test, so it is
// proven rather than described.
//
// The image is FROM scratch plus a minimal root file system: the static
// relay binary, the example configurations, a non-root user, the CA
// bundle (providers are reached over TLS) and writable /tmp and working
// directory. configs/docker/Dockerfile builds the same image with Docker;
// the files both add come from configs/docker/rootfs, and a test compares
// the two configurations.
//
//	go build (CGO_ENABLED=0)  →  layers: base (rootfs, CA, dirs), app (binary, configs)
//	                          →  config (Spec: user, entrypoint, cmd, ports, labels)
//	                          →  OCI image layout in one tar (oci-layout, index.json, blobs/)
package ociimage
