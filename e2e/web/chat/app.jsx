// A chat page as an AI SDK app writes it: useChat with resume, the
// default transport pointed at the relay's /v1/chats. The chat id is the
// page's ?chat= parameter, so a reload resumes the same chat. The stop
// button aborts the fetch (useChat's stop, a disconnect the relay lets
// run) and asks the relay to stop the generation.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";
import { useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const chatId = params.get("chat");
window.relayStreamIds = [];

const transport = new DefaultChatTransport({
  api: "/v1/chats",
  body: { model: params.get("model") ?? "mock-1" },
  // Records the stream each response serves, for the test to look at.
  fetch: async (url, init) => {
    const res = await fetch(url, init);
    const id = res.headers.get("X-Relay-Stream-Id");
    if (id) window.relayStreamIds.push(id);
    return res;
  },
});

function textOf(m) {
  return m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function App() {
  const { messages, sendMessage, status, stop, error } = useChat({ id: chatId, transport, resume: true });
  const [input, setInput] = useState("");
  window.chatState = {
    status,
    error: error ? error.message : null,
    messages: messages.map((m) => ({ role: m.role, text: textOf(m) })),
  };
  return (
    <main>
      <div id="messages">
        {messages.map((m) => (
          <div key={m.id} className={"msg " + m.role}>{textOf(m)}</div>
        ))}
      </div>
      <input id="prompt" value={input} onChange={(e) => setInput(e.target.value)} />
      <button id="send" onClick={() => { sendMessage({ text: input }); setInput(""); }}>Send</button>
      <button id="stop" onClick={async () => {
        stop();
        await fetch(`/v1/chats/${encodeURIComponent(chatId)}/stop`, { method: "POST" });
      }}>Stop</button>
      <span id="status">{status}</span>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
