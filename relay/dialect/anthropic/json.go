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
