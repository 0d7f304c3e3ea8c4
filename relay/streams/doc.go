// Package streams creates and checks the JetStream assets every role
// shares: the request work queue and its consumer, the chunk stream that
// republishes each stored frame to its live subject, and the KV buckets of
// stream metadata, idempotency, handovers, cached answers and shared
// provider state, all named in package wire. Setup is idempotent and
// leaves an asset that already has the wanted settings untouched, so every
// role calls it at start; Check only verifies, for readiness. Every asset
// has a byte limit (StorageLimits), and IsStorageFull tells a write
// refused at one from other failures.
package streams
