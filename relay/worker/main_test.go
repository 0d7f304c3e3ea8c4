package worker

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/relaydev/relay/relay/relaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(relaytest.RunnersAwaited{M: m})
}
