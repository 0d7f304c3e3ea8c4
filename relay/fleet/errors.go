package fleet

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrProviderUnavailable is what a Gate's refusal wraps: the provider (or
// the model on it) must not be called now.
var ErrProviderUnavailable = errors.New("fleet: provider unavailable")

// Why a SharedGate refuses a call. Each comes wrapped in an
// *UnavailableError, which also wraps ErrProviderUnavailable.
var (
	// ErrProviderOpen: the breaker of the provider (or of the model on
	// it) is open, or half-open with its one probe taken.
	ErrProviderOpen = errors.New("fleet: circuit breaker open")
	// ErrProviderPaused: the provider asked the cluster to wait
	// (Retry-After) and the wait is not over.
	ErrProviderPaused = errors.New("fleet: provider paused by Retry-After")
	// ErrRetryBudget: the worker spent its retry budget on the provider.
	ErrRetryBudget = errors.New("fleet: retry budget spent")
	// ErrQuotaExhausted: the worker's share of the provider's requests or
	// tokens per minute is used up.
	ErrQuotaExhausted = errors.New("fleet: rate limit reached")
)

// UnavailableError is a SharedGate's refusal of a call.
type UnavailableError struct {
	Provider, Model string
	// Cause is one of ErrProviderOpen, ErrProviderPaused, ErrRetryBudget,
	// ErrQuotaExhausted.
	Cause error
	// RetryAfter is when the provider may be called again, about; zero
	// if unknown.
	RetryAfter time.Duration
}

// Error names the package once: the cause is one of this package's
// sentinels, whose own "fleet: " is left out.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("fleet: %s/%s unavailable: %s", e.Provider, e.Model, strings.TrimPrefix(fmt.Sprint(e.Cause), "fleet: "))
}

func (e *UnavailableError) Unwrap() []error { return []error{ErrProviderUnavailable, e.Cause} }

// RetryAfterOf is the RetryAfter of a refusal in err, at least a second
// when there is one.
func RetryAfterOf(err error) time.Duration {
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return 0
	}
	return max(ue.RetryAfter, time.Second)
}
