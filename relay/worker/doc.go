// Package worker is the relay worker role: it takes generation requests off the
// work queue, calls an upstream provider, and appends the answer to the
// stream's chunk log, from which edges serve clients (see the wire
// package's "Protocol flow").
//
// How a slot takes a request, a job claims its stream, the attempt loop
// walks the route, and a stream ends: README.md beside this file.
package worker
