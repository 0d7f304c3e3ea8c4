// Package edge is the relay's client-facing role: an OpenAI-compatible HTTP
// API that queues generations for the workers and serves every stream from
// its durable log, so a client that lost its connection resumes exactly
// where it was, on any edge.
//
// Its API, and where each part of it lives in the code: README.md beside
// this file.
package edge
