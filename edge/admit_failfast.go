package edge

import (
	"net/http"
	"strconv"

	"github.com/relaydev/relay/relay/wire"
)

// HeaderFailFast asks, with "true", that a generation fail at once when its
// provider cannot take it now (paused by a Retry-After, its breaker open,
// over its rate limit) instead of waiting for it; "false" waits even when
// the key says fail_fast. On a WebSocket's upgrade request it applies to
// every start on the connection.
//
// Waiting is the default because it is what a client calling the provider
// itself would do, retrying: a short outage then costs latency, not
// answers. A client with somewhere else to go (its own fallback, a user
// who would rather see an error) fails fast.
const HeaderFailFast = "X-Relay-Fail-Fast"

// failFast is whether generations started by r fail fast: its
// X-Relay-Fail-Fast header, else the setting of the key it came with.
func failFast(r *http.Request, p principal) (bool, *wire.Error) {
	h := r.Header.Get(HeaderFailFast)
	if h == "" {
		return p.failFast, nil
	}
	v, err := strconv.ParseBool(h)
	if err != nil {
		return false, invalid(HeaderFailFast, CodeInvalidValue, "%s: %q is not a boolean; send true or false.", HeaderFailFast, h)
	}
	return v, nil
}
