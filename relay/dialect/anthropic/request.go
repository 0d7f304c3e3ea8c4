package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// Version is the anthropic-version header of every call to an Anthropic
// provider: the version whose events Decoder reads.
const Version = "2023-06-01"

// DefaultMaxTokens is the max_tokens of a call whose chat request sets no
// limit: the Messages API requires one where chat completions default to
// the model's maximum. 4096 is accepted by every Claude model; a client
// that wants longer answers sets max_tokens.
const DefaultMaxTokens = 4096

// Request is a Messages request as the relay sends it to a provider
// (FromChat). Its blocks, tools and tool choice are also what ToChat reads
// of a client's request.
type Request struct {
	Model         string          `json:"model"`
	System        string          `json:"system,omitempty"`
	Messages      []MessageParam  `json:"messages"`
	MaxTokens     int             `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   json.RawMessage `json:"temperature,omitempty"`
	TopP          json.RawMessage `json:"top_p,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking      *Thinking       `json:"thinking,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream"`
}

// MessageParam is a message of a Request, as Anthropic's SDKs name it (a
// Message is the answer).
type MessageParam struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is a content block of a request: text, image, tool_use or
// tool_result, each with its own fields.
type Block struct {
	Type   string       `json:"type"`
	Text   string       `json:"text,omitempty"`
	Source *ImageSource `json:"source,omitempty"`
	// ID, Name and Input are a tool_use's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID and Content are a tool_result's; Content is a string or
	// an array of blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// ImageSource is where an image block's image is: inline (base64) or at a
// URL.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Tool is a client tool: its input schema is a chat function's
// parameters. A client's may say type custom; the relay sends none.
type Tool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolChoice is auto, any, tool (by Name) or none;
// DisableParallelToolUse is chat's parallel_tool_calls, negated.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}

// Thinking is an extended-thinking budget.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// Metadata is a request's metadata: chat's user.
type Metadata struct {
	UserID string `json:"user_id"`
}

// thinkingBudgets are the thinking budgets of reasoning_effort values.
// max_tokens bounds thinking and answer together, as max_completion_tokens
// bounds reasoning and answer at OpenAI, so a budget is cut to leave room
// for the answer; below the API's minimum of 1024 there is no thinking.
var thinkingBudgets = map[string]int{"low": 1024, "medium": 4096, "high": 16384}

const minThinkingBudget = 1024

// thinking is the thinking setting of reasoning_effort effort within
// maxTokens, nil for none. Thinking allows no temperature or top_p of the
// client's, which the caller drops.
func thinking(effort string, maxTokens int) *Thinking {
	budget := min(thinkingBudgets[effort], maxTokens/2)
	if budget < minThinkingBudget {
		return nil
	}
	return &Thinking{Type: "enabled", BudgetTokens: budget}
}

// FromChat translates a chat completion request into a streaming
// Messages request, for a provider. System and developer messages become
// the system prompt; reasoning_effort becomes a thinking budget; tool
// calls become tool_use blocks and tool messages tool_result blocks of a
// user message; consecutive messages of one role are merged, as the API
// wants roles to alternate.
//
// A final assistant message is a prefill, which Anthropic refuses when it
// ends in whitespace: that whitespace is cut from the request and returned
// as trimmed, so the decoder can drop it again from the start of the
// continuation (NewDecoder).
func FromChat(body []byte) (out []byte, trimmed string, err error) {
	req, err := chat.ParseRequest(body)
	if err != nil {
		return nil, "", err
	}
	ar := Request{
		Model:       req.Model,
		MaxTokens:   cmp.Or(req.AnswerLimit(), DefaultMaxTokens),
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Stream:      true,
	}
	if ar.StopSequences, err = req.StopSequences(); err != nil {
		return nil, "", err
	}
	var system []string
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			s, err := chat.Text(m.Content)
			if err != nil {
				return nil, "", fmt.Errorf("messages[%d]: %w", i, err)
			}
			system = append(system, s)
			continue
		}
		role, blocks, err := blocksOf(m)
		if err != nil {
			return nil, "", fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(blocks) == 0 {
			// An empty message says nothing, and the API refuses one.
			continue
		}
		if n := len(ar.Messages); n > 0 && ar.Messages[n-1].Role == role {
			ar.Messages[n-1].Content = append(ar.Messages[n-1].Content, blocks...)
			continue
		}
		ar.Messages = append(ar.Messages, MessageParam{Role: role, Content: blocks})
	}
	ar.System = strings.Join(system, "\n\n")
	ar.Messages, trimmed = trimPrefill(ar.Messages)
	if ar.Tools, ar.ToolChoice, err = toolsOf(req); err != nil {
		return nil, "", err
	}
	forced := ar.ToolChoice != nil && (ar.ToolChoice.Type == "any" || ar.ToolChoice.Type == "tool")
	if ar.Thinking = thinking(req.ReasoningEffort, ar.MaxTokens); forced || hasToolCalls(req.Messages) {
		// The API refuses to think before a forced tool call, and after
		// tool calls whose thinking blocks a chat client never had.
		ar.Thinking = nil
	}
	if ar.Thinking != nil {
		ar.Temperature, ar.TopP = nil, nil
	}
	if req.User != "" {
		ar.Metadata = &Metadata{UserID: req.User}
	}
	out, err = json.Marshal(ar)
	return out, trimmed, err
}

func hasToolCalls(msgs []chat.Message) bool {
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// blocksOf is the role and the content blocks of a user, assistant or
// tool message.
func blocksOf(m chat.Message) (string, []Block, error) {
	switch m.Role {
	case "user", "assistant":
		ps, err := chat.Parts(m.Content)
		if err != nil {
			return "", nil, err
		}
		var blocks []Block
		for _, p := range ps {
			b, ok, err := blockOf(p)
			if err != nil {
				return "", nil, err
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		for _, tc := range m.ToolCalls {
			input := json.RawMessage(tc.Function.Arguments)
			if strings.TrimSpace(tc.Function.Arguments) == "" {
				input = json.RawMessage("{}")
			}
			if !json.Valid(input) || strings.TrimSpace(string(input))[0] != '{' {
				return "", nil, fmt.Errorf("tool call %s: arguments are not a JSON object", tc.ID)
			}
			blocks = append(blocks, Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
		}
		return m.Role, blocks, nil
	case "tool":
		s, err := chat.Text(m.Content)
		if err != nil {
			return "", nil, err
		}
		result := Block{Type: "tool_result", ToolUseID: m.ToolCallID}
		if s != "" {
			result.Content = marshal([]Block{{Type: "text", Text: s}})
		}
		return "user", []Block{result}, nil
	}
	return "", nil, fmt.Errorf("role %q has no equivalent in the Messages API", m.Role)
}

// blockOf translates a text or image part; empty text, which the API
// refuses as a block, yields none.
func blockOf(p chat.Part) (Block, bool, error) {
	switch p.Type {
	case "text":
		return Block{Type: "text", Text: p.Text}, p.Text != "", nil
	case "image_url":
		src, err := imageFrom(p.URL())
		return Block{Type: "image", Source: src}, err == nil, err
	}
	return Block{}, false, fmt.Errorf("content part of type %q has no equivalent in the Messages API", p.Type)
}

// imageFrom reads an image_url: a data URL is sent as base64 data, any
// other URL by reference.
func imageFrom(url string) (*ImageSource, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return &ImageSource{Type: "url", URL: url}, nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 {
		return nil, fmt.Errorf("image_url: a data URL must be base64")
	}
	return &ImageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
}

// trimPrefill cuts the trailing whitespace of a final assistant message
// and returns it. A prefill of whitespace alone is dropped whole: the model
// then answers after the conversation, as it did before the cut.
func trimPrefill(msgs []MessageParam) ([]MessageParam, string) {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != "assistant" {
		return msgs, ""
	}
	last := &msgs[n-1]
	k := len(last.Content)
	if k == 0 || last.Content[k-1].Type != "text" {
		return msgs, ""
	}
	full := last.Content[k-1].Text
	kept := strings.TrimRightFunc(full, unicode.IsSpace)
	if kept != "" {
		last.Content[k-1].Text = kept
		return msgs, full[len(kept):]
	}
	last.Content = last.Content[:k-1]
	if len(last.Content) == 0 {
		msgs = msgs[:n-1]
	}
	return msgs, full
}

// toolsOf translates function tools and the tool choice.
func toolsOf(req chat.Request) ([]Tool, *ToolChoice, error) {
	var tools []Tool
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, nil, fmt.Errorf("tools[%d]: type %q has no equivalent in the Messages API", i, t.Type)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	mode, name, err := chat.ToolChoice(req.ToolChoice)
	if err != nil {
		return nil, nil, err
	}
	var choice *ToolChoice
	switch mode {
	case "":
	case "auto":
		choice = &ToolChoice{Type: "auto"}
	case "none":
		choice = &ToolChoice{Type: "none"}
	case "required":
		choice = &ToolChoice{Type: "any"}
	case "function":
		choice = &ToolChoice{Type: "tool", Name: name}
	default:
		return nil, nil, fmt.Errorf("tool_choice: %q is not auto, none or required", mode)
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(tools) > 0 {
		if choice == nil {
			choice = &ToolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			disable := true
			choice.DisableParallelToolUse = &disable
		}
	}
	return tools, choice, nil
}
