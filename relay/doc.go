// Package relay is the map of the system; it holds no code. The relay makes
// an LLM token stream durable: edges take requests and serve streams,
// workers call providers and append the answer to JetStream, and the
// coordinator keeps the fleet's shared provider state.
//
// # The three roles
//
//	edge/               the client-facing role: the OpenAI-compatible HTTP and
//	                    WebSocket API, queueing, resume from the durable log
//	relay/worker/       the worker role: takes requests off the work queue, calls
//	                    providers (retries, continuation, fallback), appends frames
//	coordinator/        the coordinator role: lease, provider health, probes of
//	                    idle breakers, quota shares, canary ramps, liveness watch
//
// Only relay/app (the wiring), relay/config (the layered configuration of
// every role) and relay/cmd/relay (the binary) import a role package.
//
// # What the roles share
//
//	relay/wire/         the contract: subjects, frames, request, meta, cursor,
//	                    errors, stream ids, state keys, heartbeat messages; no
//	                    goroutines and no JetStream calls ("Protocol flow")
//	relay/streams/      JetStream set-up and checks of the streams and buckets
//	relay/chunklog/     reading and fenced appending of a stream's frames
//	relay/liveness/     heartbeats, the watcher and the handover of a silent
//	                    worker's requests
//	relay/fleet/        shared provider state, one home: the worker's admission
//	                    (SharedGate), the View every role reads, the lease,
//	                    quota nodes, status; below it the pure policies:
//	  breaker/          circuit breaker state machine
//	  quota/            shares, budgets, rate windows
//	  canary/           canary ramps
//	relay/region/       the multi-region layer (mirrored shared state)
//	relay/spend/        tenants' spend: UTC periods, budgets, the usage ledger
//	                    (one record per stream) and the edges' tally of it
//	relay/provider/     the provider catalog and the route of a model
//	relay/apikeys/      a provider's API keys: refusals, the api_keys_file and
//	                    its rotation, for the worker's calls and the
//	                    coordinator's probes alike
//	relay/upstream/     the client of an OpenAI-compatible streaming provider
//	relay/backoff/      full-jitter backoff, for every retry
//	relay/runecut/      cutting text into bounded pieces without splitting a rune
//	relay/metrics/      every Prometheus family the relay exports
//	relay/natsconn/     how a role connects to NATS
//	relay/natsserver/   the embedded nats-server of the single-machine mode
//
// # Running and testing
//
//	relay/app/          wires the roles into processes (each subcommand, and
//	                    in-process tests)
//	relay/config/       defaults, YAML, RELAY_ environment, --set flags
//	relay/cmd/relay/    the relay binary
//	relay/ociimage/     the container image, built without a Docker daemon;
//	                    relay/cmd/relay-image its command (`make image`)
//	relay/mockupstream/ the built-in fake provider, with fault injection
//	relay/relaytest/    the embedded-NATS harness of package tests
//	e2e/                end-to-end tests over real processes and sockets;
//	                    e2e/bench the benchmark, e2e/procs the process harness
package relay
