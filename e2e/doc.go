// Package e2e holds the end-to-end tests: a real nats-server, the real
// roles, real HTTP and WebSocket clients, and the fake upstream as the only
// stand-in. Every test runs its relay with start (harness_test.go), in this
// process or as processes of their own; the options say what it varies.
// The tests live in _test.go files; this file only documents them.
package e2e
