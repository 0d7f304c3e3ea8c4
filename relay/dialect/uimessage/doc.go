// Package uimessage is the Vercel AI SDK's UI message stream, the client
// side of the dialect its useChat hook speaks (POST {api}, GET
// {api}/{chatId}/stream):
//
//	ToChat     the POST body of useChat (its UIMessages, a system prompt
//	           and the model in the body) as a chat completion request
//	Encoder    a stream's frames as UI message chunks, one JSON object at a
//	           time, with its state across frames; the SSE response is
//	           each chunk as a data line, then data: [DONE]
//
// Only clients speak it: no provider does, so it has no provider side.
package uimessage
