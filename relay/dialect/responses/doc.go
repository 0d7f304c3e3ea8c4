// Package responses is OpenAI's Responses API, for both sides of the
// relay, from the same declarations.
//
// For the edge's clients: ParseRequest checks a request and translates it
// into a chat completion request; a Renderer renders the stream's frames
// as Responses events, numbered from its first frame, and builds the
// Response object; ResponseID and StreamOfItem say which stream a
// Response or an item came from.
//
// For the worker's providers: FromChat translates a chat completion
// request into a Responses request, and a Decoder reads the provider's
// events back as chat Deltas.
package responses
