package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/fleet"
)

// A refusal's text names the package once, whatever its cause, as it is
// logged by the worker that was refused.
func TestUnavailableErrorNamesThePackageOnce(t *testing.T) {
	for _, cause := range []error{fleet.ErrProviderOpen, fleet.ErrProviderPaused, fleet.ErrRetryBudget, fleet.ErrQuotaExhausted} {
		err := &fleet.UnavailableError{Provider: "alpha", Model: "m", Cause: cause}
		text := err.Error()
		if strings.Count(text, "fleet: ") != 1 || strings.Contains(text, "relay: ") || !strings.HasPrefix(text, "fleet: alpha/m unavailable: ") {
			t.Errorf("%q, want one fleet: prefix and no relay: one", text)
		}
		if !errors.Is(err, cause) || !errors.Is(err, fleet.ErrProviderUnavailable) {
			t.Errorf("%q is not its cause and ErrProviderUnavailable", text)
		}
	}
}
