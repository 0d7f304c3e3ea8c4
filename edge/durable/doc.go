// Package durable serves the Durable Streams protocol over HTTP: a
// stream's PUT, POST, GET (catch-up, long-poll, SSE), HEAD and DELETE
// under the edge's prefix, over the store of relay/durable, and every
// generation of the relay read as a stream at {prefix}/generations/{id}
// through a dialect's Renderer. README.md is its reference.
//
//	PUT    create.go   create (201) or confirm (200); forks
//	POST   append.go   append, close, idempotent producers
//	GET    read.go     catch-up and long-poll; sse.go: live=sse
//	HEAD, DELETE       handler.go
//	generations        generations.go
package durable
