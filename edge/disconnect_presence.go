package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// presenceTimeout bounds one presence question. Subscribers exist for the
// subject when it runs out, so it only fires when an edge is overloaded or
// cut off; the answer is then unknown.
const presenceTimeout = time.Second

// errPresenceUnknown is returned by followed when no definite answer came.
var errPresenceUnknown = errors.New("edge: presence unknown")

// followed asks every edge, this one included, whether a client follows
// stream id (each edge's follow.Hub answers). It reports false only on
// NATS's no-responders status.
func followed(ctx context.Context, nc *nats.Conn, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, presenceTimeout)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, wire.PresenceSubject(id), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders):
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %v", errPresenceUnknown, id, err)
}
