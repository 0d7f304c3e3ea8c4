// Package upstream is the client a relay worker uses to call a provider's
// streaming endpoint and to turn its server-sent events into token deltas.
// The worker always speaks chat completions; a provider of another Dialect
// (Anthropic Messages, the Responses API) gets the request translated
// (anthropic.FromChat, responses.FromChat: relay/dialect) and its events
// decoded into the same Deltas (anthropic.Decoder, responses.Decoder).
//
// Flow:
//
//	Client.Stream   POST {BaseURL}/chat/completions (/messages, /responses),
//	                Accept: text/event-stream
//	  non-2xx       → *StatusError (status, bounded body, RetryAfter, chat.Error)
//	  2xx JSON body → the provider's error, or ErrMalformed
//	  2xx           → *Stream
//	Stream.Next     EventReader (WHATWG SSE lines) → chat.ParseChunk → chat.Delta
//	  data: [DONE] (message_stop)     → io.EOF, SawDone() == true
//	  body ends after a finish_reason → io.EOF, SawDone() == false
//	  body ends before one            → error wrapping ErrTruncated
//	  {"error":{...}} chunk           → error wrapping *chat.Error
//	  silence > StallTimeout          → error wrapping ErrStalled
//	  no byte within FirstByteTimeout → error wrapping ErrSilent (an ErrStalled)
//	Classify(err)   → Transient | RequestFault | Credential | Canceled
//	TooLong(err)    → a RequestFault a model with a larger context window may take
//
// Transport (transport.go) carries the calls: HTTP/1.1, or HTTP/2 where TLS
// settles it, and HTTP/2 without TLS (h2c) to a plain-http Target with
// HTTP2PriorKnowledge, so that a worker's streams to it share a few
// connections.
//
// The package knows nothing about NATS or retries: the worker decides what a
// Class means for its breaker and its backoff.
package upstream
