// LangChain's ChatOpenAI with useResponsesApi as a client of the relay.
// Usage:
//   node e2e/node/langchain_test.mjs <baseURL> <input>
// It asks for the whole answer to <input> (invoke), then streams it
// (stream); after ten chunks with text it prints {"parts":10} as a line
// (the test kills the worker then) and reads on. Last it prints one JSON
// object with each answer's text and Response status (end);
// e2e/sdk_responses_test.go checks it.
import { ChatOpenAI } from "@langchain/openai";

const [baseURL, input] = process.argv.slice(2);
if (!input) {
  console.error("usage: node langchain_test.mjs <baseURL> <input>");
  process.exit(2);
}
// The edges of the test have no keys and ignore the Authorization header.
const model = new ChatOpenAI({ model: "mock-1", apiKey: "relay-dev", configuration: { baseURL }, useResponsesApi: true, maxRetries: 0 });
const out = {};

const whole = await model.invoke(input + " (whole)");
out.whole = { text: whole.text, end: whole.response_metadata?.status };

let text = "";
let parts = 0;
let last = null;
for await (const chunk of await model.stream(input)) {
  if (chunk.text) {
    text += chunk.text;
    if (++parts === 10) process.stdout.write(JSON.stringify({ parts }) + "\n");
  }
  last = chunk;
}
out.stream = { text, end: last?.response_metadata?.status, errors: [] };
process.stdout.write(JSON.stringify(out) + "\n");
