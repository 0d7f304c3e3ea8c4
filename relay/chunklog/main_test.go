package chunklog_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A region's mirror (TestAppendInRegionStaysInRegion): its consumer
		// set-up in nats-server waits up to 30s for its answer, without
		// watching for the server's shutdown.
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).setupMirrorConsumer.func3"),
	)
}
