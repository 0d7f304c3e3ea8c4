// The official openai npm package's Responses API as a client of the relay.
// Usage:
//   node e2e/node/responses_test.mjs <baseURL of edge 1> <baseURL of edge 2> <input>
// It asks edge 1 for the whole answer to <input>, streams a request the
// provider refuses, and then streams <input> with
// responses.create({stream: true}), breaks the connection after ten text
// deltas, prints {"id","cursor"} as a line and waits for a line on stdin
// (the test kills the worker meanwhile); then it resumes on edge 2 with
// responses.retrieve(id, {stream: true, starting_after: cursor}) and prints
// one JSON object with what it received. e2e/sdk_responses_test.go checks it.
import OpenAI from "openai";
import { createInterface } from "node:readline";

const [edge1, edge2, input] = process.argv.slice(2);
if (!input) {
  console.error("usage: node responses_test.mjs <baseURL1> <baseURL2> <input>");
  process.exit(2);
}
// The edges of the test have no keys and ignore the Authorization header.
const options = { apiKey: "relay-dev", maxRetries: 0, timeout: 60_000 };
const first = new OpenAI({ ...options, baseURL: edge1 });
const second = new OpenAI({ ...options, baseURL: edge2 });
const out = {};

const whole = await first.responses.create({ model: "mock-1", input: input + " (whole)" });
out.whole = { text: whole.output_text, status: whole.status, id: whole.id };

// The provider refuses: the SDK raises the status of the response.
try {
  for await (const event of await first.responses.create({ model: "mock-1", input: "[[mock: status=400]] " + input, stream: true })) {
    void event;
  }
  out.refused = { name: "none" };
} catch (e) {
  out.refused = { name: e.constructor.name, status: e.status };
}

const stream = await first.responses.create({ model: "mock-1", input, stream: true });
let id = "";
let cursor = -1;
let before = "";
let deltas = 0;
const seqs = [];
for await (const event of stream) {
  seqs.push(event.sequence_number);
  cursor = event.sequence_number;
  if (event.type === "response.created") id = event.response.id;
  if (event.type === "response.output_text.delta") {
    before += event.delta;
    if (++deltas === 10) break; // aborts the request
  }
}
process.stdout.write(JSON.stringify({ id, cursor }) + "\n");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();

let after = "";
let last = null;
const rest = await second.responses.retrieve(id, { stream: true, starting_after: cursor });
for await (const event of rest) {
  seqs.push(event.sequence_number);
  if (event.type === "response.output_text.delta") after += event.delta;
  last = event;
}
const final = last?.response;
out.resumed = {
  id,
  cursor,
  before,
  after,
  seqs,
  last: last?.type,
  status: final?.status,
  text: (final?.output ?? []).flatMap((item) => item.content ?? []).map((part) => part.text).join(""),
};
process.stdout.write(JSON.stringify(out) + "\n");
