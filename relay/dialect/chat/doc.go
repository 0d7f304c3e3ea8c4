// Package chat is OpenAI's chat completions API, the dialect the relay
// thinks in: the edge turns the other client dialects into a chat
// request, the worker's upstream client turns a chat request into the
// provider's dialect and its answer back into chat Deltas, and the chunk
// log stores what those Deltas say. A dialect package translates to and
// from chat, so a new dialect is one new folder beside this one.
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
