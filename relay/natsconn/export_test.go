package natsconn

import "time"

// SetUnreachableEvery shortens the spacing of the "nats unreachable"
// lines for a test, until it ends.
func SetUnreachableEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	old := unreachableEvery
	unreachableEvery = d
	t.Cleanup(func() { unreachableEvery = old })
}
