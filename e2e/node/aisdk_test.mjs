// The Vercel AI SDK's default provider model, openai(model), which calls
// the Responses API, or with "chat" its chat completions model,
// openai.chat(model), as a client of the relay. Usage:
//   node e2e/node/aisdk_test.mjs <baseURL> <input> [chat]
// It asks for the whole answer to <input> (generateText) and for a
// follow-up turn on it, then streams the answer to <input> (streamText);
// after ten text parts it prints {"parts":10} as a line (the
// test kills the worker then) and reads on. Last it prints one JSON object
// with each answer's text and finish reason (end); e2e/sdk_responses_test.go
// checks it.
import { generateText, streamText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const [baseURL, input, api] = process.argv.slice(2);
if (!input) {
  console.error("usage: node aisdk_test.mjs <baseURL> <input> [chat]");
  process.exit(2);
}
// The edges of the test have no keys and ignore the Authorization header.
const provider = createOpenAI({ baseURL, apiKey: "relay-dev" });
const openai = api === "chat" ? provider.chat : provider;
const out = {};

const whole = await generateText({ model: openai("mock-1"), prompt: input + " (whole)", maxRetries: 0 });
out.whole = { text: whole.text, end: whole.finishReason };

// A second turn on the first: with the Responses API the SDK sends the
// first answer back as an item_reference to the relay's item.
const followUp = await generateText({
  model: openai("mock-1"),
  messages: [{ role: "user", content: input + " (whole)" }, ...whole.response.messages, { role: "user", content: "and then?" }],
  maxRetries: 0,
});
out.followUp = { text: followUp.text, end: followUp.finishReason };

const errors = [];
const result = streamText({ model: openai("mock-1"), prompt: input, maxRetries: 0, onError: ({ error }) => errors.push(String(error)) });
let text = "";
let parts = 0;
for await (const delta of result.textStream) {
  text += delta;
  if (++parts === 10) process.stdout.write(JSON.stringify({ parts }) + "\n");
}
out.stream = { text, end: await result.finishReason, errors };
process.stdout.write(JSON.stringify(out) + "\n");
