package ociimage

import "maps"

// The fixed parts of the image. configs/docker/Dockerfile states the same
// values; dockerfile_test.go holds the two together.
const (
	// UID and GID are the relay user's (configs/docker/rootfs/etc/passwd).
	// 65532 is the non-root id distroless images use, so volume permissions
	// written for those fit this image too.
	UID, GID = 65532, 65532
	// User is the image's USER, numeric so that a runtime can check it is
	// not root without reading /etc/passwd (Kubernetes' runAsNonRoot).
	User = "65532:65532"
	// Binary is where the relay binary lives.
	Binary = "/usr/local/bin/relay"
	// ConfigDir holds the example configurations (configs/*.yaml).
	ConfigDir = "/etc/relay"
	// WorkDir is the working directory, owned by the relay user: `relay
	// dev` keeps its JetStream files in ./data below it.
	WorkDir = "/var/lib/relay"
	// CABundle is where Go's crypto/x509 looks first on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// StopSignal starts a role's graceful shutdown (a worker drains).
	StopSignal = "SIGTERM"
)

// Entrypoint is the image's ENTRYPOINT: arguments name the role.
var Entrypoint = []string{Binary}

// Cmd is the image's default CMD: everything in one process, the edge on
// every interface so that `docker run -p 8080:8080` reaches it. A role
// is chosen by replacing it: `edge --config /etc/relay/edge.yaml`.
var Cmd = []string{"dev", "--config", ConfigDir + "/dev.yaml", "--set", "edge.listen=0.0.0.0:8080"}

// Ports are the image's EXPOSE: the edge's API and the coordinator's and
// the worker's ops listeners (/healthz, /readyz, /metrics) at the
// addresses the example configurations give them.
var Ports = []string{"8080/tcp", "8082/tcp", "8083/tcp"}

// Labels are the image's OCI labels: title, description, source and
// licence, and the version and revision it was built from.
func Labels(version, revision string) map[string]string {
	l := maps.Clone(staticLabels)
	l["org.opencontainers.image.version"] = version
	l["org.opencontainers.image.revision"] = revision
	return l
}

var staticLabels = map[string]string{
	"org.opencontainers.image.title":       "relay",
	"org.opencontainers.image.description": "Durable LLM token streams over NATS JetStream",
	"org.opencontainers.image.source":      "https://github.com/relaydev/relay",
	"org.opencontainers.image.licenses":    "MIT",
}
