package worker

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/fleet"
)

// An error the worker chains onto another names each package once in the
// logs: no "worker: …: worker: …" and no "fleet: …: fleet: …".
func TestChainedErrorsNameThePackageOnce(t *testing.T) {
	refusal := &fleet.UnavailableError{Provider: "alpha", Model: "m", Cause: fleet.ErrProviderOpen}
	gateFault := errors.New("fleet: breakers unreadable")
	for _, tc := range []struct {
		outer, inner error
		want         string
	}{
		{errNoToolCallContinuation, refusal, "worker: an answer with tool calls cannot be continued: fleet: alpha/m unavailable: circuit breaker open"},
		{errNoToolCallContinuation, errHandover, "worker: an answer with tool calls cannot be continued: stream handed over by a stopping worker"},
		{fleet.ErrProviderUnavailable, gateFault, "fleet: provider unavailable: breakers unreadable"},
	} {
		err := chain(tc.outer, tc.inner)
		if err.Error() != tc.want {
			t.Errorf("%q, want %q", err.Error(), tc.want)
		}
		if !errors.Is(err, tc.outer) || !errors.Is(err, tc.inner) {
			t.Errorf("%q is not both of its errors", err.Error())
		}
		for _, prefix := range []string{"relay: ", "worker: ", "fleet: "} {
			if strings.Count(err.Error(), prefix) > 1 {
				t.Errorf("%q names %q twice", err.Error(), prefix)
			}
		}
	}
}
