package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// forwardJob is one forwarded request: it walks the model's route as a
// generation does (routeState: retries, backoff, fallbacks, the gate's
// breakers, pauses and rate limits, key rotation), but without a chunk log
// and without continuations. Once part of a streamed answer went to the
// edge, a failure ends the request: nothing can continue it.
type forwardJob struct {
	w   *Worker
	req wire.ForwardRequest
	out *forwardReply
	log *slog.Logger
	// calls counts the calls made; events, the events sent.
	calls, events int
	// usage is what the last answer reported it used.
	usage *wire.Usage
}

// serve runs the request and returns its end.
func (fj *forwardJob) serve(ctx context.Context) wire.ForwardEnd {
	all := fj.w.route(wire.Request{StreamID: fj.req.ID, Model: fj.req.Model})
	if len(all) == 0 {
		return wire.ForwardEnd{Error: modelNotServed(fj.req.Model)}
	}
	route := forwardRoute(all)
	if len(route) == 0 {
		return wire.ForwardEnd{Error: &wire.Error{
			Message: fmt.Sprintf("No provider of the model `%s` serves /v1/%s: only providers of type openai do.", fj.req.Model, fj.req.Endpoint),
			Type:    wire.TypeInvalidRequest,
			Code:    "model_not_supported",
			Param:   "model",
			Status:  http.StatusBadRequest,
		}}
	}
	state := newRouteState(route)
	for i := 0; ; {
		c := route[i]
		out := fj.call(fleet.WithCallInfo(ctx, fj.callInfo(state, i)), c)
		if out.err == nil && out.logErr == nil {
			fj.recordUsage(c)
			return wire.ForwardEnd{}
		}
		if ctx.Err() != nil || out.class == upstream.Canceled {
			return fj.stopped()
		}
		if out.class == upstream.RequestFault || fj.events > 0 || out.logErr != nil || errors.Is(out.err, upstream.ErrTooLarge) {
			return fj.failed(c, out)
		}
		switch {
		case errors.Is(out.err, fleet.ErrProviderUnavailable):
			state.close(i)
		case out.class == upstream.Credential:
			state.closeProvider(c.Provider.Name)
		default:
			state.failed(i, false, out.retryAfter)
			if out.retryAfter > maxRetryAfter {
				state.close(i)
			}
		}
		next, ok := state.next(i)
		if !ok {
			if out.class == upstream.Transient && !errors.Is(out.err, fleet.ErrProviderUnavailable) && out.retryAfter <= maxRetryAfter {
				out.err = chain(errRetriesExhausted, out.err)
			}
			fj.log.Info("forward failed; giving up", "provider", c.Provider.Name, "calls", fj.calls, "class", out.class, "err", out.err)
			return fj.failed(c, out)
		}
		if next != i {
			fj.log.Info("forward failed; falling back", "provider", c.Provider.Name, "class", out.class, "err", out.err,
				"next_provider", route[next].Provider.Name, "next_model", route[next].Model)
			i = next
			continue
		}
		b := backoff.Backoff{Config: c.Provider.Retry}
		delay := b.Delay(state.streak-1, out.retryAfter)
		fj.log.Info("forward failed; retrying", "provider", c.Provider.Name, "class", out.class, "err", out.err, "delay", delay)
		if b.Sleep(ctx, delay) != nil {
			return fj.stopped()
		}
	}
}

// callInfo describes the call of candidate i for the gate. Only the first
// call may fail fast: as with a generation, a request that is already
// being served waits like any other.
func (fj *forwardJob) callInfo(s *routeState, i int) fleet.CallInfo {
	alternatives := 0
	for k := i + 1; k < len(s.route); k++ {
		if s.open(k) {
			alternatives++
		}
	}
	return fleet.CallInfo{
		StreamID:     fj.req.ID,
		Retry:        s.calls[s.route[i].Provider.Name] > 0,
		Paced:        s.paced,
		FailFast:     fj.req.FailFast && fj.calls == 0,
		Alternatives: alternatives,
	}
}

// stopped is the end of a request the worker stops serving (it is shutting
// down): retryable elsewhere if the edge received nothing of the answer.
func (fj *forwardJob) stopped() wire.ForwardEnd {
	return wire.ForwardEnd{Retryable: fj.events == 0, Error: &wire.Error{
		Message: "The relay worker serving the request stopped.",
		Type:    wire.TypeServer,
		Code:    wire.CodeWorkerLost,
		Status:  http.StatusServiceUnavailable,
	}}
}

// failed is the end of a request that failed on candidate c, with the
// error a generation that failed before its first chunk gets.
func (fj *forwardJob) failed(c provider.Candidate, out outcome) wire.ForwardEnd {
	if errors.Is(out.logErr, nats.ErrMaxPayload) {
		return wire.ForwardEnd{Error: &wire.Error{
			Message: "A part of the provider's answer is larger than the relay can carry between its nodes (NATS max_payload).",
			Type:    wire.TypeUpstream,
			Code:    wire.CodeForwardTooLarge,
			Status:  http.StatusBadGateway,
		}}
	}
	if out.logErr != nil {
		return wire.ForwardEnd{Error: &wire.Error{
			Message: "The relay worker could not pass the answer on to the edge.",
			Type:    wire.TypeServer,
			Status:  http.StatusBadGateway,
		}}
	}
	if errors.Is(out.err, upstream.ErrTooLarge) {
		return wire.ForwardEnd{Error: &wire.Error{
			Message: fmt.Sprintf("The provider's answer is larger than the %d MiB the relay forwards; send fewer inputs per request.", wire.MaxForwardBody>>20),
			Type:    wire.TypeUpstream,
			Code:    wire.CodeForwardTooLarge,
			Status:  http.StatusBadGateway,
		}}
	}
	return wire.ForwardEnd{Error: failure(c.Provider.Name, out)}
}

// call makes one call of candidate c, admitted by the gate, and reports its
// outcome to the gate; a refused key is replaced by the next one at once.
func (fj *forwardJob) call(ctx context.Context, c provider.Candidate) outcome {
	keys := fj.w.keys[c.Provider.Name]
	key := keys.Key()
	rekeyed := false
	for {
		ticket, refused := fj.w.admit(ctx, &c)
		if refused != nil {
			return *refused
		}
		fj.calls++
		events := fj.events
		out, tokens := fj.attempt(withTicket(ctx, ticket), c, key)
		report := fleet.Report{Provider: c.Provider.Name, Model: c.Model, Class: out.class, Err: out.err, RetryAfter: out.retryAfter,
			Verdict: breaker.Neutral, Tokens: tokens, Streamed: fj.events > events}
		if out.class == upstream.Credential && !rekeyed {
			if next, ok := keys.Reject(key); ok && next != key {
				fj.log.Info("api key refused; retrying with the next", "provider", c.Provider.Name)
				ticket.Done(report)
				key, rekeyed = next, true
				continue
			}
		}
		report.Verdict = out.verdict(ctx)
		if report.Verdict == breaker.Success {
			keys.Accept(key)
		}
		ticket.Done(report)
		return out
	}
}

// attempt calls candidate c with key and passes its answer on to the
// edge; it returns the outcome and the tokens the provider reported.
func (fj *forwardJob) attempt(ctx context.Context, c provider.Candidate, key string) (outcome, int) {
	fj.usage = nil
	body, err := forwardBody(fj.req.Body, c.Model)
	if err != nil {
		return refused(err), 0
	}
	client := *fj.w.upstream
	client.FirstByteTimeout, client.StallTimeout = c.Provider.FirstTokenBound(), c.Provider.StallBound()
	target := c.Provider.Target(key)
	resp, err := client.Post(ctx, target, "/"+string(fj.req.Endpoint), body, fj.req.Stream)
	if err != nil {
		return failed(err), 0
	}
	defer resp.Close()
	callStarted(ctx) // gate_call.go
	head := wire.ForwardHead{Status: resp.Status, ContentType: resp.ContentType, Provider: c.Provider.Name, Model: c.Model}
	if fj.req.Stream {
		return fj.relayEvents(resp, head)
	}
	b, err := resp.ReadAll(wire.MaxForwardBody)
	if errors.Is(err, upstream.ErrTooLarge) {
		// The relay's limit, not the provider's fault: no retry, and
		// nothing for its breaker.
		return outcome{err: err, class: upstream.RequestFault}, 0
	}
	if err != nil {
		return failed(err), 0
	}
	head.Size = len(b)
	if err := fj.out.sendJSON(wire.ForwardHeadKind, head); err != nil {
		return outcome{logErr: err}, 0
	}
	for _, p := range pieces(b, wire.ForwardPieceSize(fj.w.nc.MaxPayload())) {
		if err := fj.out.send(wire.ForwardBody, p); err != nil {
			return outcome{logErr: err}, 0
		}
	}
	fj.usage = answerUsage(b)
	return outcome{}, usageTokens(fj.usage)
}

// relayEvents passes a streamed answer's events on, the head with the
// first: until then, a failed call can still be retried. An event larger
// than a NATS message fails to publish (nats.ErrMaxPayload), which ends
// the request with an error that says so.
func (fj *forwardJob) relayEvents(resp *upstream.Response, head wire.ForwardHead) (outcome, int) {
	tokens := 0
	for {
		data, err := resp.NextEvent()
		if errors.Is(err, io.EOF) {
			if fj.events == 0 {
				if err := fj.out.sendJSON(wire.ForwardHeadKind, head); err != nil {
					return outcome{logErr: err}, tokens
				}
			}
			return outcome{}, tokens
		}
		if err != nil {
			return failed(err), tokens
		}
		if fj.events == 0 {
			if err := fj.out.sendJSON(wire.ForwardHeadKind, head); err != nil {
				return outcome{logErr: err}, tokens
			}
		}
		if err := fj.out.send(wire.ForwardEvent, data); err != nil {
			return outcome{logErr: err}, tokens
		}
		fj.events++
		if u := answerUsage(data); u != nil {
			fj.usage = u
			tokens = max(tokens, u.TotalTokens)
		}
	}
}

// forwardRoute is the part of route a forwarded request may take: the
// candidates on providers of OpenAI's chat dialect, which have the
// forwarded endpoints next to /chat/completions. An Anthropic provider has
// none, and one of type openai_responses is not known to have them.
func forwardRoute(route []provider.Candidate) []provider.Candidate {
	var out []provider.Candidate
	for _, c := range route {
		if c.Provider.Type == "" || c.Provider.Type == provider.TypeOpenAI {
			out = append(out, c)
		}
	}
	return out
}

// forwardBody is the client's request with the candidate's model.
func forwardBody(clientBody json.RawMessage, model string) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(clientBody, &body); err != nil || body == nil {
		return nil, badBody("the request body is not a JSON object")
	}
	body["model"] = mustJSON(model)
	return mustJSON(body), nil
}

// answerUsage reads the usage of an answer (or of one event of it), nil
// if it has none.
func answerUsage(b []byte) *wire.Usage {
	var v struct {
		Usage *wire.Usage `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return nil
	}
	if v.Usage.TotalTokens == 0 {
		v.Usage.TotalTokens = v.Usage.PromptTokens + v.Usage.CompletionTokens
	}
	return v.Usage
}

// usageTokens is the total of u, what a gate's token quota counts.
func usageTokens(u *wire.Usage) int {
	if u == nil {
		return 0
	}
	return u.TotalTokens
}

// recordUsage records in the ledger what the answer of candidate c
// reported it used, where the tenants' budgets count it. An answer that
// reported nothing (a stream without stream_options.include_usage)
// records nothing: its hold at the edge counts until it expires.
func (fj *forwardJob) recordUsage(c provider.Candidate) {
	if fj.usage == nil {
		return
	}
	r := spend.NewRecord(fj.req.Tenant, fj.req.Key, time.Now(), fj.usage, c.Price.Cost(fj.usage.PromptTokens, fj.usage.CompletionTokens))
	if r.Empty() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(fj.w.appendRetry, ledgerTimeout))
	defer cancel()
	if err := fj.w.usage.record(ctx, fj.req.ID, r); err != nil {
		fj.log.Warn("usage not recorded", "tenant", fj.req.Tenant, "tokens", r.Tokens, "cost", r.CostUSD, "err", err)
	}
}
