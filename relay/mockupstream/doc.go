// Package mockupstream is relay's built-in fake LLM provider: a real HTTP
// server that speaks the OpenAI chat completions protocol, with answers you
// can predict and faults you can order per request. It backs the
// "relay mock-upstream" subcommand, local development, failure drills and
// the tests of every role. Serve speaks HTTP/1.1 and, on the same port,
// HTTP/2 without TLS to clients that start with its preface (h2c with
// prior knowledge, a provider's http2_prior_knowledge); a fault fails a
// stream over either (a cut resets an HTTP/2 stream).
//
// Its reference (the endpoints, how answers are made and continued, the
// fault directives and their keys, the pace) is README.md beside this
// file; Config documents every setting.
package mockupstream
