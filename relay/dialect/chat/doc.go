// Package chat is OpenAI's chat completions API, the dialect the relay
// thinks in: the edge turns the other client dialects into a chat
// request, the worker's upstream client turns a chat request into the
// provider's dialect and its answer back into chat Deltas, and the chunk
// log stores what those Deltas say. A dialect package translates to and
// from chat, so a new dialect is one new folder beside this one.
package chat
