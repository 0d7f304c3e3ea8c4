package upstream

import (
	"context"
	"errors"
	"github.com/relaydev/relay/relay/dialect/chat"
	"strconv"
)

// Class is what an upstream error means for the worker: retry elsewhere,
// give up on the request, fix the configuration, or nothing at all.
type Class int

const (
	// Transient failures are the provider's or the network's: connection
	// refused or reset, timeouts (including a ctx deadline), DNS, 5xx, 429,
	// 408, ErrTruncated, ErrStalled, ErrMalformed, unexpected EOF, and any
	// error not listed under another class. Retry with backoff, count
	// against the provider's breaker.
	Transient Class = iota
	// RequestFault is a 4xx other than 401, 403, 408 and 429 (400, 404,
	// 413, 422, ...), or ErrUntranslatable: the same request will fail
	// again anywhere it is sent with the same meaning. Do not retry; do
	// not blame the provider.
	RequestFault
	// Credential is 401 or 403: the API key is missing, wrong or not
	// allowed. Retrying with the same key is pointless.
	Credential
	// Canceled means the caller gave up: its ctx was cancelled or it closed
	// the Stream. Never a provider failure.
	Canceled
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case RequestFault:
		return "request_fault"
	case Credential:
		return "credential"
	case Canceled:
		return "canceled"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Classify returns the Class of a non-nil error from Client.Stream or
// Stream.Next. A context.DeadlineExceeded is Transient, not Canceled: a
// deadline is a timeout, and a provider too slow for it is failing.
func Classify(err error) Class {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return Canceled
	}
	if errors.Is(err, ErrUntranslatable) {
		return RequestFault
	}
	var se *StatusError
	if errors.As(err, &se) {
		return classifyStatus(se.Status)
	}
	var oe *chat.Error
	if errors.As(err, &oe) {
		return classifyPayload(oe)
	}
	return Transient
}

func classifyStatus(status int) Class {
	switch {
	case status == 401 || status == 403:
		return Credential
	case status == 408 || status == 429 || status >= 500:
		return Transient
	case status >= 400:
		return RequestFault
	}
	return Transient
}

// classifyPayload classifies an error a provider sent in a 2xx stream, where
// there is no status: by its code when it is an HTTP status (vLLM), else by
// OpenAI's error types and codes.
func classifyPayload(e *chat.Error) Class {
	switch {
	case e.Code == "invalid_api_key", e.Type == "authentication_error", e.Type == "permission_error":
		return Credential
	}
	if status, err := strconv.Atoi(e.Code); err == nil && status >= 400 && status <= 599 {
		return classifyStatus(status)
	}
	if e.Type == "invalid_request_error" {
		return RequestFault
	}
	return Transient
}
