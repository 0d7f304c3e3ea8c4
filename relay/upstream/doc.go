// Package upstream is the client a relay worker uses to call an
// OpenAI-compatible provider's streaming /chat/completions endpoint and to
// turn its server-sent events into token deltas.
//
// Flow:
//
//	Client.Stream   POST {BaseURL}/chat/completions, Accept: text/event-stream
//	  non-2xx       → *StatusError (status, bounded body, RetryAfter, OpenAIError)
//	  2xx JSON body → the provider's error, or ErrMalformed
//	  2xx           → *Stream
//	Stream.Next     EventReader (WHATWG SSE lines) → ParseChunk → Delta
//	  data: [DONE]                    → io.EOF, SawDone() == true
//	  body ends after a finish_reason → io.EOF, SawDone() == false
//	  body ends before one            → error wrapping ErrTruncated
//	  {"error":{...}} chunk           → error wrapping *OpenAIError
//	  silence > FirstByteTimeout or
//	  StallTimeout                    → error wrapping ErrStalled
//	Classify(err)   → Transient | RequestFault | Credential | Canceled
//
// The package knows nothing about NATS or retries: the worker decides what a
// Class means for its breaker and its backoff.
package upstream
