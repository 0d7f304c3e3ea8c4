// Package backoff spaces out the retries of an upstream call with "full
// jitter": the delay before retry n is drawn uniformly from
// [0, min(Cap, Base·2ⁿ)). Drawing from the whole interval, not around its
// middle, is what spreads the retries of many clients that failed at the
// same moment, so a provider that recovers is not hit by all of them at
// once (AWS Architecture Blog, "Exponential Backoff And Jitter").
//
// A provider's wait hint (Retry-After) is a floor under the drawn delay:
// retrying earlier than the provider asked only earns another 429.
//
// A Backoff is a value: its schedule (Config, the `retry` section of a
// provider), the source of randomness and the clock it waits on. Tests
// inject the last two, or run under testing/synctest.
package backoff
