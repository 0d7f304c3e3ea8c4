package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzMembers holds Members and Elements to encoding/json: an object they
// walk is valid JSON, and its members and their values are the ones
// json.Unmarshal finds, in order.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":[1,"x",{"b":null}],"c":"d"}`, `{"a":1,"a":2}`, `{"a\n":1}`,
		`{"a":1,}`, `{"a":1} x`, `{"a" 1}`, `[1,2]`, `{"a":[ ]}`, `{"a":[ 1 , 2 ]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var keys []string
		var vals [][]byte
		var elems [][]byte
		ok := Members(in, SkipSpace(in, 0), func(key, val []byte) bool {
			keys, vals = append(keys, string(key)), append(vals, val)
			if val[0] == '[' {
				return Elements(val, func(e []byte) bool { elems = append(elems, e); return true })
			}
			return true
		})
		if !ok {
			return
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(in, &members); err != nil || members == nil {
			t.Fatalf("walked %q, which encoding/json refuses: %v", in, err)
		}
		got := 0
		for i, k := range keys {
			// encoding/json calls a key with bytes that are not UTF-8 by
			// another name (each such byte U+FFFD); no caller looks for one.
			if !utf8.ValidString(k) || bytes.Equal(members[k], vals[i]) {
				got++
			}
			if vals[i][0] != '[' {
				continue
			}
			var want []json.RawMessage
			if err := json.Unmarshal(vals[i], &want); err != nil {
				t.Fatalf("%q: %q is no array: %v", in, vals[i], err)
			}
			for j := range want {
				if len(elems) == 0 || !bytes.Equal(bytes.TrimSpace(want[j]), elems[0]) {
					t.Fatalf("%q: element %d of %q is %q, walked %q", in, j, k, want[j], elems)
				}
				elems = elems[1:]
			}
		}
		// A key given twice keeps its last value in encoding/json.
		if len(members) == len(keys) && got != len(keys) {
			t.Fatalf("%q: walked %q = %q, encoding/json %v", in, keys, vals, members)
		}
	})
}
