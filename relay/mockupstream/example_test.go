package mockupstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/relaydev/relay/relay/mockupstream"
)

// A stream cut by a fault directive, then continued with the received text
// as an assistant prefill: the two parts add up to the predicted answer.
func Example() {
	srv, err := mockupstream.New(mockupstream.Config{Tokens: 6, TokenInterval: -1}, nil)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"

	messages := []mockupstream.Message{{Role: "user", Content: "Hello! [[mock: cut_after=2]]"}}
	first, err := streamText(url, messages)
	fmt.Printf("first:  %q, ended by %v\n", first, err)

	messages = append(messages, mockupstream.Message{Role: "assistant", Content: first})
	rest, err := streamText(url, messages)
	fmt.Printf("rest:   %q, ended by %v\n", rest, err)

	fmt.Println("exact: ", first+rest == mockupstream.AnswerText(messages, 6))
	fmt.Println("calls: ", srv.Stats().ByConversation[mockupstream.ConversationKey(messages)])
	// Output:
	// first:  "東京 👍🏽", ended by unexpected EOF
	// rest:   " Öl then 🌍 Straße", ended by <nil>
	// exact:  true
	// calls:  2
}

// streamText posts a streaming request and returns the content it got and
// the error that ended the body, if any.
func streamText(url string, messages []mockupstream.Message) (string, error) {
	body, err := json.Marshal(map[string]any{"model": "mock-1", "messages": messages, "stream": true})
	if err != nil {
		return "", err
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var text strings.Builder
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return text.String(), err
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	return text.String(), lines.Err()
}
