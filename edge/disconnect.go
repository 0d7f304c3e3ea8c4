package edge

import (
	"fmt"
	"strings"
	"time"
)

// HeaderOnDisconnect overrides Config.OnClientDisconnect for one request: a
// POST /v1/chat/completions, or the upgrade request of a WebSocket, whose
// starts it then applies to. It has the same syntax as the setting.
const HeaderOnDisconnect = "X-Relay-On-Disconnect"

// DisconnectPolicy says what happens to a generation when the client that
// started it (a POST, or a WebSocket start) goes away before the stream
// ended. The zero value is "continue".
//
// In configuration and in HeaderOnDisconnect it is written
//
//	continue                  the generation runs on; any client can resume it
//	cancel_after <duration>   e.g. "cancel_after 30s": once the duration has
//	                          passed and no client on any edge follows the
//	                          stream, cancel it; while one does, ask again
//	                          every <duration> until the stream ends
//
// A client leaving because its edge drains is not a disconnect: it was told
// to resume elsewhere. The timer lives in the edge that served the start,
// so when that edge stops, its pending timers are dropped and those streams
// run on.
type DisconnectPolicy struct {
	// CancelAfter is how long an abandoned stream may go unfollowed before
	// it is cancelled; zero means continue.
	CancelAfter time.Duration
}

// policyContinue and policyCancelAfter are the words of the syntax.
const (
	policyContinue    = "continue"
	policyCancelAfter = "cancel_after"
)

// parseDisconnectPolicy parses "continue" or "cancel_after <duration>". The
// empty string is the zero policy, so an unset key means the default.
func parseDisconnectPolicy(s string) (DisconnectPolicy, error) {
	fields := strings.Fields(s)
	switch {
	case len(fields) == 0, len(fields) == 1 && fields[0] == policyContinue:
		return DisconnectPolicy{}, nil
	case len(fields) == 2 && fields[0] == policyCancelAfter:
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return DisconnectPolicy{}, fmt.Errorf("%q: %v", s, err)
		}
		if d <= 0 {
			return DisconnectPolicy{}, fmt.Errorf("%q: the duration must be positive", s)
		}
		return DisconnectPolicy{CancelAfter: d}, nil
	}
	return DisconnectPolicy{}, fmt.Errorf(`%q: want "continue" or "cancel_after <duration>" (e.g. "cancel_after 30s")`, s)
}

// UnmarshalText parses the policy from configuration.
func (p *DisconnectPolicy) UnmarshalText(text []byte) error {
	parsed, err := parseDisconnectPolicy(string(text))
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// String renders the policy in its own syntax.
func (p DisconnectPolicy) String() string {
	if p.CancelAfter <= 0 {
		return policyContinue
	}
	return policyCancelAfter + " " + p.CancelAfter.String()
}
