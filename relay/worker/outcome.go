package worker

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// outcome is how an attempt ended, in one of three ways:
//   - logErr != nil: the chunk log refused a frame; with chunklog.ErrFenced
//     another worker owns the stream now;
//   - err != nil: the provider or the request failed, as class says;
//   - otherwise the provider finished the answer with finishReason, or
//     the answer was replayed from the cache (cached; answer_cache.go).
type outcome struct {
	finishReason string
	stopSequence string
	cached       bool
	err          error
	class        upstream.Class
	logErr       error
	// retryAfter is the wait the provider asked for with a failed call.
	retryAfter time.Duration
	// hedge, if set, is the hedge that answered instead of the attempt's
	// own call (hedge_race.go).
	hedge *leg
	// ttft is the call's time to first token, zero if it produced none.
	ttft time.Duration
}

// failed is the outcome of a call that failed with err.
func failed(err error) outcome {
	out := outcome{err: err, class: upstream.Classify(err)}
	if se := (*upstream.StatusError)(nil); errors.As(err, &se) {
		out.retryAfter = se.RetryAfter
	}
	return out
}

// refused is the outcome of a request the relay cannot send anywhere; err
// is the *wire.Error the client gets.
func refused(err error) outcome {
	return outcome{err: err, class: upstream.RequestFault}
}

// errNoToolCallContinuation ends a stream that was cut after it published
// tool calls, by a failed call or a worker that stopped: a continuation
// continues text, not a half-sent tool call.
var errNoToolCallContinuation = errors.New("worker: an answer with tool calls cannot be continued")

// errRetriesExhausted wraps the last failure of a request that gave up
// because its route had no retry left (max_retries_per_model,
// retry.max_retries), not because a gate refused it: the client learns
// which limit ended the stream.
var errRetriesExhausted = errors.New("worker: retries exhausted")

// limitCode is the code of the limit that ended out, "" if none did.
func limitCode(out outcome) string {
	switch {
	case errors.Is(out.err, fleet.ErrRetryBudget):
		return wire.CodeRetryBudget
	case errors.Is(out.err, fleet.ErrProviderOpen):
		return wire.CodeBreakerOpen
	case errors.Is(out.err, fleet.ErrProviderPaused):
		return wire.CodeProviderPaused
	case errors.Is(out.err, fleet.ErrQuotaExhausted):
		return wire.CodeProviderRateLimit
	case errors.Is(out.err, errRetriesExhausted):
		return wire.CodeRetriesExhausted
	}
	return ""
}

// statusClientClosedRequest is the status of a cancelled stream's error:
// nginx's "client closed request", a 4xx because the client chose it.
const statusClientClosedRequest = 499

// endFrame is the terminal frame for out. An answer with any chunk that
// did not finish is incomplete, never done, so the client knows it is cut.
func (j *job) endFrame(out outcome) wire.Frame {
	f := wire.Frame{Kind: wire.KindEnd, Usage: j.usage, Cost: j.cost, Attempts: j.attempts}
	switch {
	case out.err == nil:
		f.Status, f.FinishReason, f.StopSequence, f.Cached = wire.StatusDone, out.finishReason, out.stopSequence, out.cached
		f.Provider, f.Model = j.provider, j.model
	case errors.Is(out.err, errCancelled):
		f.Status = wire.StatusCancelled
		f.Error = &wire.Error{
			Message: "The stream was cancelled by the client.",
			Type:    wire.TypeCancelled,
			Code:    string(wire.StatusCancelled),
			Status:  statusClientClosedRequest,
		}
	case j.writer.Seq() > 0:
		f.Status = wire.StatusIncomplete
		f.Error = &wire.Error{
			Message: "The answer is incomplete: " + reason(j.provider, out) + ".",
			Type:    wire.TypeIncomplete,
			Code:    limitCode(out),
			Status:  http.StatusBadGateway,
		}
	default:
		f.Status = wire.StatusFailed
		f.Error = failure(j.provider, out)
	}
	return f
}

// failure is the error of a stream that failed before any chunk. A request
// fault is the client's to fix, so it gets the provider's own error and
// status; anything else is the relay's or the provider's problem.
func failure(provider string, out outcome) *wire.Error {
	if pe := (*wire.Error)(nil); errors.As(out.err, &pe) {
		return pe
	}
	if out.class == upstream.RequestFault {
		return providerError(out.err)
	}
	if errors.Is(out.err, fleet.ErrProviderUnavailable) {
		return &wire.Error{
			Message:      "No provider can take the request now: " + reason(provider, out) + ".",
			Type:         wire.TypeUpstream,
			Code:         limitCode(out),
			Status:       http.StatusServiceUnavailable,
			RetryAfterMS: fleet.RetryAfterOf(out.err).Milliseconds(),
		}
	}
	return &wire.Error{
		Message: "The upstream provider failed: " + reason(provider, out) + ".",
		Type:    wire.TypeUpstream,
		Code:    limitCode(out),
		Status:  http.StatusBadGateway,
	}
}

// reason says why an attempt failed, and which limit ended the stream if
// one did, without quoting the provider's error text, which can hold
// details of the relay's credentials.
func reason(provider string, out outcome) string {
	if ue := (*fleet.UnavailableError)(nil); errors.As(out.err, &ue) && ue.Provider != "" {
		// A refused call never reached a provider: the job's names the
		// one before it, if any.
		provider = ue.Provider
	}
	switch {
	case errors.Is(out.err, errNoToolCallContinuation):
		return "it was cut after it held tool calls, which cannot be continued"
	case errors.Is(out.err, fleet.ErrRetryBudget):
		return fmt.Sprintf("the retry budget of provider %s is spent (too many of the calls to it are retries), so no retry was made", provider)
	case errors.Is(out.err, fleet.ErrProviderOpen):
		return fmt.Sprintf("the circuit breaker of provider %s is open", provider)
	case errors.Is(out.err, fleet.ErrProviderPaused):
		return fmt.Sprintf("provider %s asked the relay to wait (Retry-After)", provider)
	case errors.Is(out.err, fleet.ErrQuotaExhausted):
		return fmt.Sprintf("the rate limit of provider %s is reached", provider)
	case errors.Is(out.err, fleet.ErrProviderUnavailable):
		return fmt.Sprintf("provider %s is unavailable", provider)
	case errors.Is(out.err, errRetriesExhausted):
		return fmt.Sprintf("provider %s failed or stopped responding, and the request's retries are exhausted", provider)
	}
	switch out.class {
	case upstream.Credential:
		return fmt.Sprintf("provider %s rejected the relay's credentials", provider)
	case upstream.RequestFault:
		return fmt.Sprintf("provider %s rejected the request", provider)
	case upstream.Canceled:
		return fmt.Sprintf("the call to provider %s was cancelled", provider)
	}
	return fmt.Sprintf("provider %s failed or stopped responding", provider)
}

// providerError renders a request fault as the provider reported it: from
// a non-2xx answer with its status, or from an error chunk mid-stream,
// whose status is its code when that is one (vLLM) and 400 otherwise.
func providerError(err error) *wire.Error {
	if se := (*upstream.StatusError)(nil); errors.As(err, &se) {
		return fromOpenAI(se.Err, se.Status)
	}
	if oe := (*chat.Error)(nil); errors.As(err, &oe) {
		status := http.StatusBadRequest
		if code, convErr := strconv.Atoi(oe.Code); convErr == nil && code >= 400 && code <= 499 {
			status = code
		}
		return fromOpenAI(*oe, status)
	}
	return &wire.Error{Message: err.Error(), Type: wire.TypeInvalidRequest, Status: http.StatusBadRequest}
}

func fromOpenAI(e chat.Error, status int) *wire.Error {
	out := &wire.Error{Message: e.Message, Type: e.Type, Code: e.Code, Param: e.Param, Status: status}
	if out.Message == "" {
		out.Message = http.StatusText(status)
	}
	if out.Type == "" {
		out.Type = wire.TypeInvalidRequest
	}
	return out
}
