// Package chat is OpenAI's chat completions API, both sides of it, and
// the dialect the relay thinks in. For clients: the request's checks
// (CheckRequest), a stream's frames rendered as chunks (Stream) and a
// whole answer as one chat.completion (Answer). For providers: their
// chunks read into Deltas (ParseChunk), which the chunk log stores. The
// other dialects translate to and from the Request declared here, so a
// new dialect is one new folder beside this one.
package chat

import "errors"

// ErrMalformed means a provider sent data that is not what its dialect
// sends: a chunk or event that does not parse, or parses to a shape the
// dialect does not have. It is a provider fault: the upstream client
// classifies it as transient, and the same error elsewhere is retried.
var ErrMalformed = errors.New("malformed stream data")

// ErrNoDelta is what a dialect's decoder of provider events returns for
// an event that carries nothing to deliver (a ping, the start of a block
// whose first fragment comes later).
var ErrNoDelta = errors.New("no delta in event")
