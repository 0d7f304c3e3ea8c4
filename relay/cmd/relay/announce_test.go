package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
)

// The dev ready line's curl asks for a model dev serves, and names the
// fake upstream only when dev runs it.
func TestDevReadyLine(t *testing.T) {
	var own, mock bytes.Buffer
	announce(&own, config.RoleDev, app.Addrs{Edge: "127.0.0.1:8080", NATS: "nats://127.0.0.1:4222", Model: "gpt-4.1-mini"})
	announce(&mock, config.RoleDev, app.Addrs{Edge: "127.0.0.1:8080", NATS: "nats://127.0.0.1:4222", MockUpstream: "127.0.0.1:9000", Model: "mock-1"})
	if line := own.String(); strings.Contains(line, "fake upstream") || !strings.Contains(line, `{"model":"gpt-4.1-mini","stream":true`) {
		t.Errorf("with providers: %q; want no fake upstream and a curl for gpt-4.1-mini", line)
	}
	if line := mock.String(); !strings.Contains(line, "fake upstream http://127.0.0.1:9000") || !strings.Contains(line, `{"model":"mock-1","stream":true`) {
		t.Errorf("with the fake upstream: %q; want it named and a curl for mock-1", line)
	}
}
