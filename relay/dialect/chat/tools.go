package chat

import "encoding/json"

// ToolFragment is a tool_calls array of one fragment, as chat chunks send
// them: the first with id and name, the next with argument text.
func ToolFragment(index int, id, name, args string) json.RawMessage {
	type function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		Index    int      `json:"index"`
		ID       string   `json:"id,omitempty"`
		Type     string   `json:"type,omitempty"`
		Function function `json:"function"`
	}
	c := call{Index: index, ID: id, Function: function{Name: name, Arguments: args}}
	if id != "" {
		c.Type = "function"
	}
	b, _ := json.Marshal([]call{c})
	return b
}
