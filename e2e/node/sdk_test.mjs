// The official openai npm package as a client of the relay. Usage:
//   node e2e/node/sdk_test.mjs http://127.0.0.1:8080/v1
// It prints one JSON object with what each case received; e2e/sdk_test.go
// checks it against the fake upstream's answers.
import OpenAI from "openai";

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node sdk_test.mjs <baseURL>");
  process.exit(2);
}
// The edge of `relay dev` has no keys and ignores the Authorization header.
const client = new OpenAI({ baseURL, apiKey: "relay-dev", maxRetries: 0, timeout: 30_000 });
const ask = (content, stream) => ({ model: "mock-1", stream, messages: [{ role: "user", content }] });
const out = {};

const whole = await client.chat.completions.create(ask("node sdk: whole", false));
out.whole = whole.choices[0].message.content;

let text = "";
for await (const chunk of await client.chat.completions.create(ask("node sdk: stream", true))) {
  text += chunk.choices[0]?.delta?.content ?? "";
}
out.stream = text;

// Read three chunks, break the connection, resume through the SDK with
// Last-Event-ID on GET /v1/streams/{id}.
const { data: first, response } = await client.chat.completions.create(ask("node sdk: resume", true)).withResponse();
const id = response.headers.get("x-relay-stream-id");
let before = "";
let cursor = "";
let n = 0;
for await (const chunk of first) {
  before += chunk.choices[0]?.delta?.content ?? "";
  cursor = chunk.relay.cursor;
  if (++n === 3) break; // aborts the request
}
let after = "";
const rest = await client.get(`/streams/${id}`, { stream: true, headers: { "Last-Event-ID": cursor } });
for await (const chunk of rest) {
  after += chunk.choices?.[0]?.delta?.content ?? "";
}
out.resumed = { before, after, cursor };

try {
  for await (const chunk of await client.chat.completions.create(ask("[[mock: status=400]] node sdk: failed", true))) {
    void chunk;
  }
  out.failed = { name: "none" };
} catch (e) {
  out.failed = { name: e.constructor.name, status: e.status, type: e.type ?? e.error?.type };
}

try {
  await client.chat.completions.create(ask("[[mock: status=400]] node sdk: failed whole", false));
  out.failed_whole = { name: "none" };
} catch (e) {
  out.failed_whole = { name: e.constructor.name, status: e.status, type: e.type ?? e.error?.type };
}

process.stdout.write(JSON.stringify(out));
