package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// messagesEvent is one event of a Messages stream, its data decoded as far
// as this test reads it.
type messagesEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID string `json:"id"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
	} `json:"content_block"`
	Delta struct {
		Type         string `json:"type"`
		Text         string `json:"text"`
		Thinking     string `json:"thinking"`
		Signature    string `json:"signature"`
		StopReason   string `json:"stop_reason"`
		StopSequence string `json:"stop_sequence"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// postMessages sends a request to the edge with the dev key: in
// x-api-key, as Anthropic's SDK sends it, and as a bearer token, which
// the chat endpoints read.
func postMessages(ctx context.Context, t *testing.T, method, url string, body any) []byte {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(t, err)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, in)
	must(t, err)
	req.Header.Set("x-api-key", "relay-dev")
	req.Header.Set("Authorization", "Bearer relay-dev")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	must(t, err)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, out)
	}
	return out
}

// TestUpstreamAnthropicPassThrough: a Messages client (raw HTTP) streams,
// through real processes, from a provider of type anthropic that thinks,
// signs its thinking, reports prompt cache counts and stops at the
// request's stop sequence, and gets all of it as Anthropic sent it: the
// thinking block with its signature_delta before its content_block_stop,
// the answer cut before the stop sequence, stop_reason stop_sequence with
// the sequence, and the cache counts in message_delta's usage. The whole
// Message, read back by its id, says the same.
func TestUpstreamAnthropicPassThrough(t *testing.T) {
	const tokens = 30
	s := start(t, options{Processes: true, ProviderType: "anthropic", Mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	system, user := "You are a mock.", "Think, sign and stop. [[mock: reasoning=4]]"
	msgs := []mockupstream.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
	answer := mockupstream.AnswerText(msgs, tokens)
	runes := []rune(answer)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	want := answer[:strings.Index(answer, stop)]

	body := postMessages(ctx, t, http.MethodPost, s.Edge+"/v1/messages", map[string]any{
		"model": "mock-1", "max_tokens": 1000, "stream": true, "system": system, "stop_sequences": []string{stop},
		"messages": []map[string]any{{"role": "user", "content": user}},
	})
	var (
		id, thinking, signature, text string
		seq                           []string
		end                           messagesEvent
	)
	for block := range strings.SplitSeq(string(body), "\n\n") {
		var data string
		for line := range strings.SplitSeq(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = d
			}
		}
		var ev messagesEvent
		if data == "" || json.Unmarshal([]byte(data), &ev) != nil || ev.Type == "ping" {
			continue
		}
		switch {
		case ev.Type == "message_start":
			id = ev.Message.ID
		case ev.Type == "content_block_start":
			seq = append(seq, "start "+ev.ContentBlock.Type)
		case ev.Type == "content_block_stop":
			seq = append(seq, "stop")
		case ev.Delta.Type == "thinking_delta":
			thinking += ev.Delta.Thinking
		case ev.Delta.Type == "signature_delta":
			signature += ev.Delta.Signature
			seq = append(seq, "signature")
		case ev.Delta.Type == "text_delta":
			text += ev.Delta.Text
		case ev.Type == "message_delta":
			end = ev
		}
	}
	if got := strings.Join(seq, ", "); got != "start thinking, signature, stop, start text, stop" {
		t.Errorf("blocks: %s; want a thinking block closed by its signature, then the text", got)
	}
	if thinking != strings.Join(mockupstream.Reasoning(msgs, 4), "") || signature == "" {
		t.Errorf("thinking %q signed %q, want %q signed", thinking, signature, strings.Join(mockupstream.Reasoning(msgs, 4), ""))
	}
	if text != want || end.Delta.StopReason != "stop_sequence" || end.Delta.StopSequence != stop {
		t.Errorf("text %q (%s %q), want %q stopped by %q", text, end.Delta.StopReason, end.Delta.StopSequence, want, stop)
	}
	if u := end.Usage; u.CacheCreationInputTokens == 0 || u.CacheReadInputTokens != 0 || u.InputTokens == 0 {
		t.Errorf("usage %+v, want the system prompt written to the cache and the rest as input", u)
	}

	var msg struct {
		Content []struct {
			Type, Text, Thinking, Signature string
		} `json:"content"`
		StopReason   string         `json:"stop_reason"`
		StopSequence string         `json:"stop_sequence"`
		Usage        anthropicUsage `json:"usage"`
	}
	must(t, json.Unmarshal(postMessages(ctx, t, http.MethodGet, s.Edge+"/v1/messages/"+id, nil), &msg))
	if len(msg.Content) != 2 || msg.Content[0].Signature != signature || msg.Content[0].Thinking != thinking || msg.Content[1].Text != want ||
		msg.StopReason != "stop_sequence" || msg.StopSequence != stop || msg.Usage != end.Usage {
		t.Errorf("the Message %+v differs from its stream", msg)
	}

	// A chat client of the same relay gets what chat has a place for:
	// the thinking as reasoning_content, the cache write among the prompt
	// details.
	chatUser := "Think for chat. [[mock: reasoning=2]]"
	var chat struct {
		Choices []struct {
			Message struct {
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokensDetails map[string]int `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	must(t, json.Unmarshal(postMessages(ctx, t, http.MethodPost, s.Edge+"/v1/chat/completions", map[string]any{
		"model": "mock-1", "messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": chatUser}},
	}), &chat))
	chatMsgs := []mockupstream.Message{{Role: "system", Content: system}, {Role: "user", Content: chatUser}}
	if d := chat.Usage.PromptTokensDetails; len(chat.Choices) != 1 || chat.Choices[0].Message.ReasoningContent != strings.Join(mockupstream.Reasoning(chatMsgs, 2), "") ||
		d["cache_creation_input_tokens"] == 0 || d["cached_tokens"] != 0 {
		t.Errorf("chat completion %+v, want the reasoning and the cache write", chat)
	}
}
