package mockupstream

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Roles of chat messages. Only system, developer and user messages decide the
// answer; assistant messages are what the model already said.
const (
	roleSystem    = "system"
	roleDeveloper = "developer"
	roleUser      = "user"
	roleAssistant = "assistant"
)

// Message is one chat message as OpenAI clients send it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// UnmarshalJSON accepts the content either as a string or, as newer OpenAI
// clients send it, as an array of parts, whose text parts are concatenated.
// Without this, such a client would get a 400 from the mock but not from the
// real API.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role}
	if len(raw.Content) == 0 || string(raw.Content) == "null" {
		return nil
	}
	if raw.Content[0] == '"' {
		return json.Unmarshal(raw.Content, &m.Content)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw.Content, &parts); err != nil {
		return fmt.Errorf("message content: want a string or an array of parts: %w", err)
	}
	var text strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	m.Content = text.String()
	return nil
}

// decidesAnswer reports whether a message with this role is part of what
// the answer is computed from.
func decidesAnswer(role string) bool {
	return role == roleSystem || role == roleDeveloper || role == roleUser
}
