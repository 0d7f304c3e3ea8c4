package liveness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// A heartbeat that comes late is not yet a dead worker. Under load (a
// burst of thousands of streams on two cores) a live worker's beats can
// come later than its timeout; handing its requests over then is worse
// than waiting: every takeover fences a live generation, restarts it
// elsewhere and loads the server, which makes more beats late, and the
// judgement feeds itself. So a watcher asks a silent worker directly
// before taking anything (wire.LivenessProbeSubject):
//
//   - no responders: the worker's connection is gone (the process died,
//     or the server dropped it), and the server says so at once, so a
//     crashed worker's requests move as soon as they did without a probe;
//   - an answer: the worker lives, only its beats were late; its clock
//     restarts;
//   - no answer within the worker's own timeout: it is alive to the server
//     but unable to answer (paused, hung), and its requests move, unless
//     the watcher holds the judgement because it or the server may be the
//     one behind (hold.go).
//
// A watcher that cannot ask (its own connection is down) judges no one.

// verdict is the outcome of probing a silent worker.
type verdict int

const (
	// verdictGone: no responders. The server itself says the worker is
	// not there: hard evidence, trusted even when the watcher holds its
	// other judgements (hold.go).
	verdictGone verdict = iota
	// verdictMute: no answer within the timeout. The worker may be hung,
	// or the watcher or the server behind.
	verdictMute
	// verdictAlive: the worker answered.
	verdictAlive
	// verdictUnknown: the watcher could not ask.
	verdictUnknown
)

// LogValue logs a verdict by name (a JSON handler would log its number).
func (v verdict) LogValue() slog.Value { return slog.StringValue(v.String()) }

func (v verdict) String() string {
	switch v {
	case verdictGone:
		return "no responders"
	case verdictMute:
		return "no answer"
	case verdictAlive:
		return "answered"
	}
	return "unknown"
}

// probe asks instance over nc whether it lives, waiting until ctx's
// deadline (the instance's liveness timeout).
func probe(ctx context.Context, nc *nats.Conn, instance string) verdict {
	_, err := nc.RequestWithContext(ctx, wire.LivenessProbeSubject(instance), nil)
	switch {
	case err == nil:
		return verdictAlive
	case errors.Is(err, nats.ErrNoResponders):
		return verdictGone
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return verdictMute
	}
	return verdictUnknown
}

// AnswerProbes answers watchers' probes of instance on nc, which should be
// the connection the worker's heartbeats go out on: it is the one whose
// silence watchers judge. The answer comes from the subscription's own
// goroutine, so a worker busy elsewhere still answers.
func AnswerProbes(nc *nats.Conn, instance string) (unsubscribe func(), err error) {
	sub, err := nc.Subscribe(wire.LivenessProbeSubject(instance), func(m *nats.Msg) {
		_ = m.Respond(nil)
	})
	if err != nil {
		return nil, fmt.Errorf("liveness: subscribe %s: %w", wire.LivenessProbeSubject(instance), err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
