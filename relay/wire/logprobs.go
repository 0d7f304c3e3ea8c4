package wire

import (
	"encoding/json"
	"maps"
	"slices"
)

// MergeLogprobs merges the choice.logprobs objects of consecutive deltas
// or chunks (Frame.Logprobs): one is kept as the provider sent it; several
// become one object with their content and refusal arrays concatenated in
// order (entries unchanged) and, of any other member, the last value. nil
// for none.
func MergeLogprobs(objs []json.RawMessage) json.RawMessage {
	switch len(objs) {
	case 0:
		return nil
	case 1:
		return objs[0]
	}
	arrays := map[string][]json.RawMessage{}
	other := map[string]json.RawMessage{}
	for _, o := range objs {
		var m map[string]json.RawMessage
		if json.Unmarshal(o, &m) != nil {
			// Not an object: nothing to merge by name; such a provider
			// would not be read by any client either.
			continue
		}
		for k, v := range m {
			var entries []json.RawMessage
			if (k == "content" || k == "refusal") && string(v) != "null" && json.Unmarshal(v, &entries) == nil {
				if arrays[k] == nil {
					arrays[k] = []json.RawMessage{}
				}
				arrays[k] = append(arrays[k], entries...)
				continue
			}
			other[k] = v
		}
	}
	b := []byte{'{'}
	member := func(k string, v []byte) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, marshalRaw(k)...)
		b = append(b, ':')
		b = append(b, v...)
	}
	for _, k := range []string{"content", "refusal"} {
		if entries, ok := arrays[k]; ok {
			member(k, marshalRaw(entries))
		} else if v, ok := other[k]; ok {
			member(k, v)
		}
		delete(other, k)
	}
	for _, k := range slices.Sorted(maps.Keys(other)) {
		member(k, other[k])
	}
	return append(b, '}')
}

// marshalRaw encodes a string or a list of raw values, which cannot fail.
func marshalRaw(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("wire: encode: " + err.Error())
	}
	return b
}
