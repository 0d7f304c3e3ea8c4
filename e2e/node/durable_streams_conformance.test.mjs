// The Durable Streams server conformance suite, as its own CLI runs it
// (its test-runner), against the server at CONFORMANCE_TEST_URL.
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.CONFORMANCE_TEST_URL
if (!baseUrl) {
  throw new Error("CONFORMANCE_TEST_URL is required")
}
runConformanceTests({ baseUrl })
