// Package relay is the map of the system; it holds no code. The relay makes
// an LLM token stream durable: edges take requests and serve streams,
// workers call providers and append the answer to JetStream, and the
// coordinator keeps the fleet's shared provider state.
//
// Every package of the repository has one line below, and a test
// (map_test.go) fails when one is missing or listed but gone. Only
// relay/app, relay/config and relay/cmd/relay import a role package.
//
// # The three roles
//
//	edge                   the client APIs over HTTP and WebSocket, queueing, resume from the durable log
//	edge/follow            the edge's reader of the durable log: live frames, one subscription per stream, gaps re-read; in order, none twice, none missed
//	edge/durable           the Durable Streams protocol over HTTP: PUT/POST/GET/HEAD/DELETE, long-poll, SSE, producers, forks; generations read as streams
//	relay/worker           takes requests off the work queue, calls providers (retries, continuation, fallback), appends frames
//	coordinator            lease, provider health, probes of idle breakers, quota shares, canary ramps, liveness watch
//
// # What the roles share
//
//	relay/wire             the contract: subjects, frames, request, meta, cursor, errors, state keys (no goroutines, no JetStream calls)
//	relay/streams          JetStream set-up and checks of the streams and buckets, the partitions of the chunk log
//	relay/chunklog         reading and fenced appending of a stream's frames
//	relay/durable          Durable Streams in the log: records per (tenant, path), appends checked against the state the last frame carries, reads stitched across forks
//	relay/liveness         heartbeats, the watcher and the handover of a silent worker's requests
//	relay/fleet            shared provider state, one home: admission (SharedGate), the View every role reads, lease, quotas, status
//	relay/fleet/breaker    the circuit breaker's pure state machine
//	relay/fleet/quota      shares, budgets, rate and first-token windows
//	relay/fleet/canary     canary ramps
//	relay/fleet/slots      the tenants' fair share of the workers' slots
//	relay/region           the multi-region layer (mirrored shared state)
//	relay/spend            tenants' spend: UTC periods, budgets, the usage ledger and the edges' tally of it
//	relay/provider         the provider catalog, a model's settings and route
//	relay/apikeys          a provider's API keys: refusals, the api_keys_file and its rotation
//	relay/upstream         the client of a streaming provider: its dialects, SSE reader, watchdog, classification
//	relay/dialect/chat     OpenAI's chat completions, the dialect the others translate to and from: request and its checks, chunks rendered and parsed, chat.completion, error
//	relay/dialect/anthropic  Anthropic's Messages API for both sides: request types and checks, events for clients and from providers, errors
//	relay/dialect/responses  OpenAI's Responses API, likewise
//	relay/dialect/uimessage  the Vercel AI SDK's UI message stream (useChat), client side: its POST as a chat request, frames as UI message chunks
//	relay/jsonscan         JSON read by hand on the hot paths
//	relay/backoff          full-jitter backoff, for every retry
//	relay/runecut          cutting text into bounded pieces without splitting a rune
//	relay/runners          long-lived goroutines that serve bursts of work
//	relay/metrics          every Prometheus family the relay exports
//	relay/tracing          OpenTelemetry set-up and a request's trace across the hops
//	relay/natsconn         how a role connects to NATS
//	relay/natsperm         the NATS permissions of each role and node, rendered as nats-server users (relay nats users)
//	relay/natsserver       the embedded nats-server of the single-machine mode
//
// # Running and testing
//
//	relay/app              wires the roles into processes (each subcommand, and in-process tests)
//	relay/config           defaults, YAML, RELAY_ environment, --set flags
//	relay/cmd/relay        the relay binary
//	relay/statusview       the screen of relay status: an edge's status as tables, redrawn with --watch
//	relay/cmd/relay-image  builds the container image (make image)
//	relay/ociimage         the container image, built without a Docker daemon
//	relay/mockupstream     the built-in fake provider, with fault injection
//	relay/relaytest        the embedded-NATS harness of package tests
//	configs                tests of what configs/ ships: the Helm chart, the compose file, the systemd units
//	e2e                    end-to-end tests over real processes and sockets
//	e2e/procs              the process harness: nats-servers and roles as processes
//	e2e/bench              the benchmark (make bench)
package relay
