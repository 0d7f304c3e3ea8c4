package relaytest

import (
	"fmt"
	"strings"
)

// Conversation is a streamed chat completion request for model with turns
// messages of about 1 KB each, users' and assistants' in turn, as a chat
// client sends its whole conversation with every turn; it asks for usage,
// a temperature and at most 50 tokens. Benchmarks of request handling use
// it.
func Conversation(model string, turns int) []byte {
	msgs := make([]string, turns)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = fmt.Sprintf(`{"role":%q,"content":%q}`, role, strings.Repeat("lorem ipsum dolor sit amet, ", 36))
	}
	return []byte(`{"model":` + fmt.Sprintf("%q", model) + `,"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"max_tokens":50,"messages":[` +
		strings.Join(msgs, ",") + `]}`)
}
