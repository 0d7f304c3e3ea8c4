// Package backoff spaces out retries with "full jitter": the delay before
// retry n is drawn uniformly from [0, min(Cap, Base·2ⁿ)). Drawing from the
// whole interval, not around its middle, is what spreads the retries of
// many clients that failed at the same moment, so a provider (or a NATS
// server) that recovers is not hit by all of them at once.
//
// A provider's wait hint (Retry-After) is a floor under the drawn delay:
// retrying earlier than the provider asked only earns another 429.
//
// A Backoff is a value: its schedule (Config, the `retry` section of a
// provider), the source of randomness and the clock it waits on. Tests
// inject the last two, or run under testing/synctest.
//
// The retries are those of an upstream call (the worker's attempt loop),
// of a chunk-log write, of a pull, of setting up the streams; Rerun keeps
// a watch or a loop meant to last running, starting it again after each
// failure.
package backoff
