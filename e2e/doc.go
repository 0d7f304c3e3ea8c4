// Package e2e holds the end-to-end tests: a real nats-server, the real
// roles, real HTTP and WebSocket clients, and the fake upstream as the only
// stand-in. The tests live in _test.go files; this file only documents
// them.
package e2e
