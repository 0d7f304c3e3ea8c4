package e2e

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaydev/relay/relay/mockupstream"
)

// TestSDKGoPreviousResponseChain chains three responses with openai-go's
// PreviousResponseID, on two edges holding only the shipped NATS grants:
// the fake provider gets the whole
// conversation each time (every user turn and every answer, in order),
// and its answer is the one to that whole conversation. An id the relay
// does not know is the 400 the SDK raises for OpenAI's
// previous_response_not_found.
func TestSDKGoPreviousResponseChain(t *testing.T) {
	const tokens = 6
	sys := start(t, options{Edges: 2, Secured: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1}})
	clients := []*responses.ResponseService{responsesClient(sys.Edges[0]), responsesClient(sys.Edges[1])}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var turns []mockupstream.Message
	prev := ""
	for i, question := range []string{"go chain: first", "go chain: second", "go chain: third"} {
		params := inputOf(question)
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		resp, err := clients[i%2].New(ctx, params)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		turns = append(turns, mockupstream.Message{Role: "user", Content: question})
		if want := mockupstream.AnswerText(turns, tokens); resp.OutputText() != want {
			t.Fatalf("response %d answered %q, want the answer to the whole conversation %q", i, resp.OutputText(), want)
		}
		turns = append(turns, mockupstream.Message{Role: "assistant", Content: resp.OutputText()})
		prev = resp.ID
	}
	calls := sys.fronts["mock"].allChats()
	last := calls[len(calls)-1]
	if want := []string{"user", "assistant", "user", "assistant", "user"}; !slices.Equal(last.roles, want) {
		t.Fatalf("the provider's last request had the roles %v, want %v", last.roles, want)
	}
	if n := sys.Mock.Stats().ByConversation[mockupstream.ConversationKey(turns)]; n != 1 {
		t.Fatalf("the provider was asked the whole conversation %d times, want 1", n)
	}

	params := inputOf("go chain: unknown")
	params.PreviousResponseID = openai.String("resp_sunknownunknownunknownunknown")
	_, err := clients[0].New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "previous_response_not_found" {
		t.Fatalf("an unknown previous response: %v", err)
	}
}
