package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/mockupstream"
)

// uiChatBody is useChat's POST body for chat with one user message.
func uiChatBody(chat, text string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"trigger":"submit-message","model":"mock-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":%q}]}]}`, chat, text)
}

// uiAnswer reads a UI message stream to its [DONE] and returns the text
// of its text deltas and the last chunk's type.
func uiAnswer(t *testing.T, resp *http.Response) (text, last string) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	var b strings.Builder
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return b.String(), last
		}
		var c struct{ Type, Delta string }
		must(t, json.Unmarshal([]byte(data), &c))
		if c.Type == "text-delta" {
			b.WriteString(c.Delta)
		}
		last = c.Type
	}
	t.Fatalf("the stream ended without [DONE] (%v) after %q", sc.Err(), b.String())
	return "", ""
}

// TestChatsOneGenerationPerChat: submits of one chat racing on two edges
// start one generation: one is served it, the others get 409 chat_busy
// naming it; X-Relay-On-Busy: attach is served the same answer, whole;
// nothing running is a 204, for another tenant's chat too; after the
// end, the chat starts anew.
func TestChatsOneGenerationPerChat(t *testing.T) {
	const tokens = 40
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 20 * time.Millisecond}, Tune: withTenants(nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const question = "Chats: one generation per chat."
	_, want := prompt(question, tokens)

	if resp := send(t, ctx, "GET", sys.Edge+"/v1/chats/race-1/stream", nil, keyAcme, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("before any submit: %d", resp.StatusCode)
	}

	const racers = 6
	resps := make([]*http.Response, racers)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-gate
			resps[i] = send(t, ctx, "POST", sys.Edges[i%2]+"/v1/chats", uiChatBody("race-1", question), keyAcme, nil)
		})
	}
	close(gate)
	wg.Wait()
	var served *http.Response
	for i, resp := range resps {
		if resp.StatusCode == http.StatusOK {
			if served != nil {
				t.Fatalf("racer %d was served a generation too", i)
			}
			served = resp
		}
	}
	if served == nil {
		t.Fatal("no racer was served")
	}
	id := served.Header.Get("X-Relay-Stream-Id")
	for i, resp := range resps {
		if resp == served {
			continue
		}
		var e struct{ Error struct{ Code string } }
		must(t, json.NewDecoder(resp.Body).Decode(&e))
		if resp.StatusCode != http.StatusConflict || e.Error.Code != edge.CodeChatBusy || resp.Header.Get("X-Relay-Stream-Id") != id {
			t.Fatalf("racer %d: %d %+v, stream %s; want 409 %s naming %s", i, resp.StatusCode, e, resp.Header.Get("X-Relay-Stream-Id"), edge.CodeChatBusy, id)
		}
	}

	attached := send(t, ctx, "POST", sys.Edges[1]+"/v1/chats", uiChatBody("race-1", question), keyAcme, http.Header{edge.HeaderOnBusy: {"attach"}})
	if attached.StatusCode != http.StatusOK || attached.Header.Get("X-Relay-Stream-Id") != id {
		t.Fatalf("attach: %d, stream %s; want %s", attached.StatusCode, attached.Header.Get("X-Relay-Stream-Id"), id)
	}
	if resp := send(t, ctx, "GET", sys.Edge+"/v1/chats/race-1/stream", nil, keyBeta, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("another tenant's chat of the same id: %d", resp.StatusCode)
	}
	for _, resp := range []*http.Response{served, attached} {
		if text, last := uiAnswer(t, resp); text != want || last != "finish" {
			t.Fatalf("answer %q ending %s; want %q, finished", text, last, want)
		}
	}
	if n := len(sys.chatsFor(question)); n != 1 {
		t.Fatalf("%d upstream calls; want 1", n)
	}
	if resp := send(t, ctx, "GET", sys.Edges[1]+"/v1/chats/race-1/stream", nil, keyAcme, nil); resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("after the end: %d %s", resp.StatusCode, body)
	}
	next := send(t, ctx, "POST", sys.Edges[1]+"/v1/chats", uiChatBody("race-1", question), keyAcme, nil)
	if next.StatusCode != http.StatusOK || next.Header.Get("X-Relay-Stream-Id") == id {
		t.Fatalf("after the end a submit is %d on stream %s (the first was %s)", next.StatusCode, next.Header.Get("X-Relay-Stream-Id"), id)
	}
	uiAnswer(t, next)
}

// chatsFor are the fake upstream's calls for the conversation that
// starts with question.
func (s *system) chatsFor(question string) []upstreamCall {
	var calls []upstreamCall
	for _, c := range s.fronts["mock"].allChats() {
		if c.conv == question {
			calls = append(calls, c)
		}
	}
	return calls
}
