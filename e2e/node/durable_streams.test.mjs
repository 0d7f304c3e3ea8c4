// The public Durable Streams server conformance suite, run by vitest
// against the edge at DS_URL (e2e/durable_streams_test.go starts it).
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.DS_URL
if (!baseUrl) {
  throw new Error("DS_URL must name the edge's Durable Streams prefix")
}

runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.DS_LONG_POLL_TIMEOUT_MS || 20000),
})
