// Package mockupstream is relay's built-in fake LLM provider: a real HTTP
// server that speaks the OpenAI chat completions protocol, with answers you
// can predict and faults you can order per request. It backs the
// "relay mock-upstream" subcommand, local development, failure drills and
// the tests of every role. Serve speaks HTTP/1.1 and, on the same port,
// HTTP/2 without TLS to clients that start with its preface (h2c with
// prior knowledge, a provider's http2_prior_knowledge); a fault fails a
// stream over either (a cut resets an HTTP/2 stream).
//
// # Endpoints
//
//   - POST /v1/chat/completions: with "stream": true, server-sent events
//     "data: {chat.completion.chunk}", one per event and flushed at once: a
//     chunk with delta {"role":"assistant","content":""}, one chunk per token
//     with delta {"content":...}, a chunk with an empty delta and
//     finish_reason "stop" (or "length" when max_tokens or
//     max_completion_tokens cut the answer), then, if the request has
//     "stream_options": {"include_usage": true}, a chunk with empty choices
//     and usage, and finally "data: [DONE]". With "stream": false, one
//     "chat.completion" object, sent after the time the stream would have
//     taken. Every chunk has system_fingerprint "fp_mock". With "logprobs":
//     true, each content chunk's choice has logprobs {"content": [one
//     entry], "refusal": null} with "top_logprobs" alternatives (the
//     token itself first); otherwise logprobs is null.
//   - POST /v1/messages: Anthropic's Messages API (key in x-api-key or as
//     a bearer token). Streamed: message_start, ping, a thinking block
//     (with the reasoning directive: a thinking_delta per token, then a
//     signature_delta), a text block (content_block_start, a text_delta
//     per token, content_block_stop), message_delta with the stop reason
//     (end_turn, max_tokens, or stop_sequence with the sequence) and
//     usage, message_stop (left out with no_done). Errors have
//     Anthropic's shape
//     {"type":"error","error":{"type":"rate_limit_error","message":...}},
//     and a final assistant message that ends in whitespace gets 400, as
//     from Anthropic.
//   - POST /v1/responses: OpenAI's Responses API. Streamed: named events
//     with sequence_number from response.created to response.completed
//     (response.incomplete when max_output_tokens cut the answer), a
//     response.output_text.delta per token.
//   - POST /v1/embeddings: one deterministic unit vector per input
//     (Embedding; "dimensions", default 1536; "encoding_format" float or
//     base64). POST /v1/completions: the legacy text completions, with the
//     answer chat gives to one user message holding the prompt, streamed
//     ("text_completion" chunks, then [DONE]) or not. Fault directives in
//     the inputs or the prompt apply as for chat, and both count under
//     their conversation in Stats.ByConversation.
//   - GET /v1/models: the configured models, in OpenAI's list shape.
//   - GET /mock/stats: the Stats counters as JSON (no API key needed).
//   - PUT /mock/weather: the provider's ordinary misbehaviour from now on
//     (Weather, as JSON: {"cut":0.05,"stall":0.05,"rate_limited":0.03,
//     "retry_after":"1s"}; {} is fair weather).
//   - PUT /mock/faults: the server-wide fault spec from now on
//     (Config.Faults, as JSON: {"faults":"status=503, times=0,
//     model=mock-1"}; {"faults":""} is none): a provider, or one of its
//     models, that goes down and comes back.
//
// Errors have OpenAI's shape:
//
//	{"error":{"message":"...","type":"invalid_request_error","param":null,"code":null}}
//
// An unknown model gets 404 with code "model_not_found"; a missing or wrong
// API key gets 401 with code "invalid_api_key"; a request longer than its
// model's Config.ContextWindows entry gets 400 with code
// "context_length_exceeded" (Anthropic's "prompt is too long" on
// /v1/messages).
//
// # Answers
//
// The answer is a pure function of the system, developer and user messages
// and of Config.Tokens; see Answer and AnswerText. It does not depend on the
// model, so a fallback to another model continues the same answer, nor on
// assistant messages. Tokens mix ASCII words, German umlauts and ß, CJK and
// 4-byte emoji; each is at least two runes long.
//
// The mock continues an answer the way a model continues a prefilled one:
//
//   - Prefill: if the last message is an assistant message whose content is
//     a prefix of the answer, only the rest is sent. If the prefix ends
//     inside a token, the first chunk is the rest of that token, so prefix
//     plus the streamed text is exactly the answer. A prefill that is not a
//     prefix of the answer is ignored and the whole answer is sent.
//   - Prompt mode: if the conversation ends with an assistant message and
//     then one user message (in any wording, such as "continue exactly where
//     you stopped"), and that assistant content is a non-empty, strict prefix
//     of the answer to the messages before it, the mock continues from there
//     too. Otherwise the final user message is a new turn with a fresh
//     answer, so a multi-turn chat (whose assistant messages are whole
//     answers) works as with a real model.
//
// In both cases the answer and the conversation key are those of the
// messages before that assistant message, so a continuation is counted with
// the request it continues. Usage counts only the tokens of this response,
// and max_tokens limits them.
//
// # Fault directives
//
// Faults are written inside any user message as a directive, or server-wide
// in Config.Faults with the same list and without the brackets:
//
//	directive = "[[mock:" [ item { "," item } ] "]]"
//	item      = key "=" value | key          (a key alone sets a boolean to true)
//
// Spaces around keys, values and commas are ignored. All directives of a
// request are read together; a key may appear once. A request with any
// directive, even an empty "[[mock:]]", ignores Config.Faults. A malformed
// directive, an unknown key or a bad value is answered with 400 and a
// message naming the item. The directive's text stays part of the message,
// so it is part of what decides the answer.
//
// Durations are Go durations (500ms, 2s, 1m). Counts N are content tokens
// sent in this response (the overlap chunk included); a fault "after N"
// never fires in a response that has fewer than N tokens.
//
//   - status=CODE: answer with HTTP status CODE (400-599) and an OpenAI
//     error whose type and code fit the status (429: "requests" and
//     "rate_limit_exceeded"; 5xx: "server_error").
//     [[mock: status=503]]
//   - retry_after=SECONDS, retry_after_ms=N: with status, also send the
//     header Retry-After or retry-after-ms, as OpenAI does on 429 and 503.
//     [[mock: status=429, retry_after=2, retry_after_ms=1500]]
//   - cut_after=N: drop the connection abruptly after N content tokens: no
//     finish reason, no [DONE], no end of the chunked body.
//     [[mock: cut_after=5]]
//   - eof_after=N: end the body cleanly after N content tokens, without
//     finish reason or [DONE].
//     [[mock: eof_after=5]]
//   - malformed_after=N: after N content tokens send a data line with
//     truncated JSON, then end the body.
//     [[mock: malformed_after=3]]
//   - error_after=N: after N content tokens send the dialect's error event
//     for an overloaded provider (a chat chunk {"error":{...}}, Anthropic's
//     event: error with overloaded_error, a Responses error event), then
//     end the body.
//     [[mock: error_after=3]]
//   - stall_before=DUR: send nothing at all, not even the status line, for
//     DUR before answering; keepalive comments are not sent then.
//     [[mock: stall_before=30s]]
//   - first_token_after=DUR: once the stream started (status line and
//     role chunk sent), wait DUR before the first token, instead of the
//     configured time to first token (Config.TTFT); keepalive comments
//     are sent then, if Config.CommentInterval is set.
//     [[mock: first_token_after=5s, times=1]]
//   - stall_after=N, stall_for=DUR (always together): after N content
//     tokens, send no chunk for DUR (keepalive comments are, if
//     Config.CommentInterval is set), then carry on.
//     [[mock: stall_after=3, stall_for=10s]]
//   - split_utf8=true: write each event in small writes cut inside
//     multi-byte characters, flushing each.
//     [[mock: split_utf8]]
//   - no_done=true: end the stream after the finish reason (and usage)
//     without "data: [DONE]".
//     [[mock: no_done]]
//   - reject_prefill=true: answer 400 invalid_request_error when the last
//     message is an assistant message, like providers without prefill. As
//     the first request of a conversation has no prefill, this usually
//     wants times=0. (Config.NoPrefill makes models refuse it always.)
//     [[mock: reject_prefill, times=0]]
//   - reset=true: drop the connection before any byte of the response,
//     status line included (an HTTP/2 stream is reset), as a proxy that
//     cuts a connection does. Excludes status.
//     [[mock: reset]]
//   - overlap=N: on a continuation, first re-send the last N runes of the
//     prefix as a chunk of their own, like a model that repeats itself.
//     [[mock: overlap=4, times=0]]
//   - reasoning=N: before the answer, send N reasoning tokens (Reasoning)
//     as delta.reasoning_content chunks, as DeepSeek and vLLM do; non-stream
//     answers have message.reasoning_content. Usage then counts them in
//     completion_tokens and has prompt_tokens_details (cached_tokens: the
//     prompt of the request a continuation continues) and
//     completion_tokens_details (reasoning_tokens: N). On the Messages
//     endpoint the reasoning is a thinking block closed by a signature_delta
//     (non-stream: with its signature), and usage has the prompt cache's
//     counts: cache_creation_input_tokens (the messages before the last, on
//     a request that is no continuation) or cache_read_input_tokens (a
//     continuation), left out of input_tokens. Not a fault, but a
//     directive like them, so times=0 makes every request think.
//     [[mock: reasoning=5, times=0]]
//   - times=K: the directive's faults apply to the first K requests of the
//     conversation (counted as in Stats.ByConversation, so retries and
//     continuations count) and later requests are answered normally.
//     Default 1; times=0 means every request.
//     [[mock: status=503, times=3]]
//   - model=NAME: the directive's faults apply only to requests for model
//     NAME; requests for other models are answered normally (and still
//     count for times). A fallback to another model escapes them.
//     [[mock: status=503, times=0, model=mock-1]]
//
// The Messages and Responses endpoints give the same answers to the same
// conversation (system prompt or instructions, then the messages' text)
// and obey the same directives, weather and stats; cuts, stalls and early
// ends count the text deltas as content tokens. A Messages request's
// stop_sequences end the answer before the first of them it holds, with
// stop_reason stop_sequence and the sequence in stop_sequence.
//
// Only status, retry_after, retry_after_ms, stall_before, reset,
// reject_prefill, overlap, reasoning, times and model apply to
// non-streaming requests. Stalls end
// as soon as the client goes away. cut_after, eof_after, malformed_after
// and error_after exclude each other.
//
// # Speed
//
// Tokens are paced by Config.TokenInterval (default 20ms). A negative
// TokenInterval sends them at full speed, which is what most tests want.
package mockupstream
