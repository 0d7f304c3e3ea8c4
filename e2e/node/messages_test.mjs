// The official @anthropic-ai/sdk as a client of the relay's Messages API,
// in front of an OpenAI-compatible upstream (the mock).
// Usage:
//   node e2e/node/messages_test.mjs <baseURL of edge 1> <baseURL of edge 2> <input> <prefill>
// On edge 1 it asks for the whole answer to <input> (whole), a tool round
// trip, an answer to <input> (prefill) that continues <prefill> (the
// provider cuts it once), a stream
// the provider refuses, and the answer to <input> (stream) with the SDK's
// messages.stream() helper. Then it streams <input> with
// messages.create({stream: true}), breaks the connection after ten text
// deltas, prints {"id","cursor"} as a line and waits for a line on stdin
// (the test kills the worker meanwhile); then it resumes on edge 2 with a
// GET of the Message's events after Last-Event-ID: cursor, parsed by the
// SDK's own SSE reader, and prints one JSON object with what it received.
// e2e/sdk_messages_test.go checks it.
import Anthropic from "@anthropic-ai/sdk";
import { Stream } from "@anthropic-ai/sdk/streaming";
import { createInterface } from "node:readline";

const [edge1, edge2, input, prefill] = process.argv.slice(2);
if (!prefill) {
  console.error("usage: node messages_test.mjs <baseURL1> <baseURL2> <input> <prefill>");
  process.exit(2);
}
// The edges of the test have no keys and ignore the credential.
const options = { apiKey: "relay-dev", maxRetries: 0, timeout: 60_000 };
const first = new Anthropic({ ...options, baseURL: edge1 });
const model = "mock-1";
const max_tokens = 1024;
const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
const out = {};

const whole = await first.messages.create({ model, max_tokens, messages: [{ role: "user", content: input + " (whole)" }] });
out.whole = { text: textOf(whole), stop: whole.stop_reason, output_tokens: whole.usage.output_tokens, id: whole.id };

// A tool round trip: the model's tool_use and the client's tool_result
// go back as chat tool calls and a tool message.
const tools = [{ name: "get_weather", description: "The weather in a city", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
const afterTool = await first.messages.create({
  model,
  max_tokens,
  tools,
  tool_choice: { type: "auto" },
  messages: [
    { role: "user", content: input + " (tools)" },
    { role: "assistant", content: [{ type: "text", text: "Let me look." }, { type: "tool_use", id: "toolu_01", name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01", content: "sunny" }, { type: "text", text: "and tomorrow?" }] },
  ],
});
out.tools = { text: textOf(afterTool), stop: afterTool.stop_reason };

// A prefill: the answer continues it and does not repeat it, also when
// the provider drops the connection after five tokens and the relay
// continues the prefill and those tokens as one answer.
const continued = await first.messages.create({
  model,
  max_tokens,
  messages: [{ role: "user", content: input + " (prefill) [[mock: cut_after=5]]" }, { role: "assistant", content: prefill }],
});
out.prefill = { text: textOf(continued), stop: continued.stop_reason };

// The provider refuses: the SDK raises the status of the response.
try {
  for await (const event of await first.messages.create({ model, max_tokens, stream: true, messages: [{ role: "user", content: "[[mock: status=400]] " + input }] })) {
    void event;
  }
  out.refused = { name: "none" };
} catch (e) {
  out.refused = { name: e.constructor.name, status: e.status, type: e.error?.error?.type };
}

// The SDK's stream helper builds the final Message from the events.
const helper = first.messages.stream({ model, max_tokens, messages: [{ role: "user", content: input + " (stream)" }] });
let helperText = "";
helper.on("text", (text) => (helperText += text));
const final = await helper.finalMessage();
out.stream = { text: helperText, final: textOf(final), stop: final.stop_reason, output_tokens: final.usage.output_tokens };

// A stream cut after ten text deltas. The SDK yields every event but
// pings, and the relay numbers exactly those from 0: the last event's id
// is the count of events read, less one.
const stream = await first.messages.create({ model, max_tokens, stream: true, messages: [{ role: "user", content: input }] });
let id = "";
let events = 0;
let before = "";
let deltas = 0;
for await (const event of stream) {
  events++;
  if (event.type === "message_start") id = event.message.id;
  if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
    before += event.delta.text;
    if (++deltas === 10) break; // aborts the request
  }
}
const cursor = events - 1;
process.stdout.write(JSON.stringify({ id, cursor }) + "\n");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();

const res = await fetch(`${edge2}/v1/messages/${id}`, {
  headers: { "x-api-key": options.apiKey, "anthropic-version": "2023-06-01", accept: "text/event-stream", "last-event-id": String(cursor) },
});
let after = "";
let last = null;
let stop = null;
for await (const event of Stream.fromSSEResponse(res, new AbortController())) {
  if (event.type === "content_block_delta" && event.delta.type === "text_delta") after += event.delta.text;
  if (event.type === "message_delta") stop = event.delta.stop_reason;
  last = event.type;
}
out.resumed = { id, cursor, status: res.status, before, after, last, stop };
process.stdout.write(JSON.stringify(out) + "\n");
