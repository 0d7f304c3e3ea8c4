package worker

import (
	"bytes"
	"encoding/json"

	"github.com/relaydev/relay/relay/jsonscan"
)

// # A fresh answer's body in one pass
//
// decodeBody decodes the client's whole body into a map, and encodes it
// again with the relay's three members set: for a conversation of 20 KB
// that is most of a millisecond of the worker's processor per request,
// on the way to the provider. For a fresh answer (no continuation) the
// body is the client's with model, stream and stream_options set, which
// spliceBody writes by copying the body once with the three values put in
// place. It gives up, and decodeBody answers, where the two could
// differ: a key given twice (encoding/json keeps the last), an escaped
// key, stream_options that is not an object or sets include_usage other
// than true, or JSON deeper than jsonscan follows. FuzzSpliceBody holds it
// to decodeBody's result, value for value.

// maxSplicedMembers bounds the members of an object spliceBody compares
// for repeats; a body with more is left to decodeBody.
const maxSplicedMembers = 32

// spliceBody returns the provider's body for a fresh answer to body
// (upstreamBody), false if decodeBody must write it.
func spliceBody(body []byte, model string) ([]byte, bool) {
	var members memberSet
	var modelV, streamV, optsV []byte
	ok := jsonscan.Members(body, jsonscan.SkipSpace(body, 0), func(key, val []byte) bool {
		if !members.add(key) {
			return false
		}
		switch string(key) {
		case "model":
			modelV = val
		case "stream":
			streamV = val
		case "stream_options":
			optsV = val
		}
		return true
	})
	if !ok {
		return nil, false
	}
	opts, ok := usageOptions(optsV)
	if !ok {
		return nil, false
	}
	name, err := json.Marshal(model)
	if err != nil {
		return nil, false
	}
	// The values replaced, in the order they appear; the members the body
	// lacks go before its closing brace.
	type edit struct {
		at, end int
		val     []byte
	}
	var edits [3]edit
	var missing [3][]byte
	ne, nm := 0, 0
	for _, m := range []struct {
		key      string
		old, val []byte
	}{{"model", modelV, name}, {"stream", streamV, []byte("true")}, {"stream_options", optsV, opts}} {
		if m.old == nil {
			missing[nm], nm = []byte(`"`+m.key+`":`+string(m.val)), nm+1
			continue
		}
		if opts == nil && m.key == "stream_options" {
			continue // the client's already asks for usage
		}
		at := offsetIn(body, m.old)
		edits[ne], ne = edit{at, at + len(m.old), m.val}, ne+1
	}
	es := edits[:ne]
	for i := 1; i < len(es); i++ { // at most three: an insertion sort
		for j := i; j > 0 && es[j].at < es[j-1].at; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	closing := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+len(name)+64)
	from := 0
	for _, e := range es {
		out = append(append(out, body[from:e.at]...), e.val...)
		from = e.end
	}
	out = append(out, body[from:closing]...)
	for i, m := range missing[:nm] {
		if i > 0 || members.n > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, body[closing:]...), true
}

// usageOptions returns the stream_options value that asks for usage in
// place of opts (the client's, nil if it sent none): nil if opts already
// asks for it; false if decodeBody must decide.
func usageOptions(opts []byte) ([]byte, bool) {
	if opts == nil || isJSONNull(opts) {
		return []byte(`{"include_usage":true}`), true
	}
	var members memberSet
	var usage []byte
	ok := jsonscan.Members(opts, 0, func(key, val []byte) bool {
		if string(key) == "include_usage" {
			usage = val
		}
		return members.add(key)
	})
	switch {
	case !ok:
		return nil, false
	case usage == nil && members.n == 0:
		return []byte(`{"include_usage":true}`), true
	case usage == nil:
		return append([]byte(`{"include_usage":true,`), opts[1:]...), true
	case string(usage) == "true":
		return nil, true
	}
	return nil, false
}

// memberSet holds the keys of an object's members, to tell a key given
// twice, which encoding/json would collapse into its last value.
type memberSet struct {
	keys [maxSplicedMembers][]byte
	n    int
}

// add adds key, and reports false if it was given before or the object
// has more than maxSplicedMembers members.
func (s *memberSet) add(key []byte) bool {
	if s.n == len(s.keys) {
		return false
	}
	for _, k := range s.keys[:s.n] {
		if bytes.Equal(k, key) {
			return false
		}
	}
	s.keys[s.n], s.n = key, s.n+1
	return true
}

// offsetIn is where sub, a slice of b, starts in b.
func offsetIn(b, sub []byte) int { return cap(b) - cap(sub) }

func isJSONNull(val []byte) bool { return string(val) == "null" }

// scanLimits finds the values of tokenLimitFields in body in one pass,
// the last of each as encoding/json would; false if it gave up.
func scanLimits(body []byte) (fields [len(tokenLimitFields)]json.RawMessage, ok bool) {
	ok = jsonscan.Members(body, jsonscan.SkipSpace(body, 0), func(key, val []byte) bool {
		for i, f := range tokenLimitFields {
			if string(key) == f {
				fields[i] = val
			}
		}
		return true
	})
	return fields, ok
}
