// Package anthropic is Anthropic's Messages API as both sides of the relay
// speak it, from the same declarations:
//
//	the edge     ToChat and its checks (a client's request as a chat request),
//	             Events (frames as the stream's events, and its Message),
//	             ErrorOf (the error object, its type from the status)
//	the worker   FromChat (a chat request for a provider), Decoder (the
//	             provider's events as chat Deltas)
//	both         the request's types, Usage
//
// It knows neither HTTP serving nor the client of a provider: the edge
// and relay/upstream adapt it to their writers and readers.
package anthropic
