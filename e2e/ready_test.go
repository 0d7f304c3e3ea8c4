package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
)

// TestReadyFollowsNATS: every role's /readyz turns false when the NATS
// server goes away and true again once it is back, while /healthz (the
// process is alive) stays true throughout.
func TestReadyFollowsNATS(t *testing.T) {
	srv := relaytest.RestartableNATS(t)
	sys := start(t, options{NATS: srv.Server(), Coordinator: true, Tune: withOpsModels(nil)})
	roles := map[string]string{"edge": sys.Edge, "worker": sys.Worker, "coordinator": sys.Coordinator}

	ready := func(want bool) {
		t.Helper()
		for role, base := range roles {
			relaytest.Eventually(t, 20*time.Second, 50*time.Millisecond, func() bool {
				status, _ := get(t, base+"/readyz")
				return (status == http.StatusOK) == want
			})
			if status, body := get(t, base+"/healthz"); status != http.StatusOK {
				t.Fatalf("%s /healthz = %d %s while ready=%v", role, status, body, want)
			}
		}
	}
	ready(true)
	srv.Stop()
	ready(false)
	for role, base := range roles {
		if _, body := get(t, base+"/readyz"); body == "" {
			t.Errorf("%s /readyz gives no reason while not ready", role)
		}
	}
	srv.Start()
	ready(true)
}
