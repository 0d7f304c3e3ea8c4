package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// # Requests encoded and decoded by hand
//
// A request carries the client's whole body, and a chat client sends its
// whole conversation with every turn. encoding/json compacts the body
// when it encodes a request (a pass over it, escaping its HTML
// characters) and scans it twice when it decodes one (validating, then
// decoding). Encode copies the body as it is, JSON the edge checked; a
// worker decodes with DecodeRequest, which reads the members Encode writes
// by hand, in one pass, and leaves anything else to encoding/json (another
// key, one written with escapes or differing in case, a null, a value of
// the wrong type, anything that is not JSON): the request is the same
// either way, and so is the error-or-not (FuzzDecodeRequest).

// Encode renders the request for the request queue as json.Marshal does,
// except that Body is written as it is rather than compacted: it must be
// valid JSON (the edge checked it), or nil, written as null.
func (r *Request) Encode() []byte {
	b := make([]byte, 0, len(r.Body)+len(r.StreamID)+len(r.Tenant)+len(r.Key)+len(r.Model)+len(r.RequestID)+16*len(r.Models)+128)
	b = append(b, `{"stream_id":`...)
	b = AppendJSONString(b, r.StreamID)
	if r.Tenant != "" {
		b = AppendJSONString(append(b, `,"tenant":`...), r.Tenant)
	}
	if r.Key != "" {
		b = AppendJSONString(append(b, `,"key":`...), r.Key)
	}
	b = AppendJSONString(append(b, `,"model":`...), r.Model)
	b = append(b, `,"body":`...)
	if r.Body == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, r.Body...)
	}
	b = strconv.AppendInt(append(b, `,"created":`...), r.Created, 10)
	if r.FailFast {
		b = append(b, `,"fail_fast":true`...)
	}
	if r.RequestID != "" {
		b = AppendJSONString(append(b, `,"request_id":`...), r.RequestID)
	}
	if len(r.Models) > 0 {
		b = append(b, `,"models":[`...)
		for i, m := range r.Models {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, m)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// DecodeRequest parses a queued request.
func DecodeRequest(data []byte) (Request, error) {
	if r, ok := decodeRequestCommon(data); ok {
		return r, nil
	}
	var r Request
	if err := json.Unmarshal(data, &r); err != nil {
		return Request{}, fmt.Errorf("wire: decode request: %w", err)
	}
	return r, nil
}

// decodeRequestCommon parses data by hand and reports true, or false when
// it leaves data to encoding/json.
func decodeRequestCommon(data []byte) (Request, bool) {
	var r Request
	p := newJSONScanner(data)
	if !p.document(func(key string) bool { return p.requestMember(&r, key) }) {
		return Request{}, false
	}
	return r, true
}

// requestMember reads the value of r's member key.
func (p *jsonScanner) requestMember(r *Request, key string) bool {
	switch key {
	case "stream_id":
		return p.str(&r.StreamID)
	case "tenant":
		return p.str(&r.Tenant)
	case "key":
		return p.str(&r.Key)
	case "model":
		return p.str(&r.Model)
	case "body":
		return p.raw(&r.Body)
	case "created":
		return p.int64(&r.Created)
	case "fail_fast":
		return p.bool(&r.FailFast)
	case "request_id":
		return p.str(&r.RequestID)
	case "models":
		return p.strs(&r.Models)
	}
	return false
}

// strs reads a non-empty array of strings, as Encode writes one; anything
// else is encoding/json's.
func (p *jsonScanner) strs(dst *[]string) bool {
	if !p.next('[') {
		return false
	}
	var out []string
	for {
		p.space()
		var s string
		if !p.str(&s) {
			return false
		}
		out = append(out, s)
		p.space()
		switch {
		case p.next(']'):
			*dst = out
			return true
		case !p.next(','):
			return false
		}
	}
}
