// Package liveness hands a silent worker's requests to another worker at
// once, well before AckWait: workers publish heartbeats (Beats builds them),
// watchers follow them (Watcher) and hand the deliveries of a worker that
// fell silent over (HandOver), one NAK per delivery however many watchers
// see it. The messages are wire.Heartbeat and wire.Delivery.
//
// How heartbeats are sent and judged, how a silent worker is probed, and
// how its requests are handed over and paced: README.md beside this file.
package liveness
