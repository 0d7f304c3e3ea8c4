package anthropic

import "encoding/json"

// marshal encodes what the dialect builds; none of it can fail to encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("anthropic: encode: " + err.Error())
	}
	return b
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
