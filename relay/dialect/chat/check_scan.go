package chat

import (
	"bytes"
	"strconv"

	"github.com/relaydev/relay/relay/jsonscan"
)

// # A request's one pass
//
// decodeRequest checks a body with encoding/json, which scans the text
// of every message eight times over: validating and decoding the body,
// the messages array, each message, and each content string again. A
// chat client sends its whole conversation with every turn, so for a
// conversation of 22 KB that was 0.7 ms of the edge's processor on the way
// to the first token. scanRequest accepts a valid request by hand
// (jsonscan) in one walk over the body, which reads only the members the
// checks need and scans a message's text three times (validating the
// messages array, each message, then its content), not eight, besides a
// quick look at the whole for text that is not UTF-8 (jsonscan.ValidText).
//
// It decides only acceptance: anything it is not sure of (an error to
// name, an escaped key or model, a member given twice, nesting deeper
// than jsonscan follows) makes it give up, and decodeRequest answers, so
// that what is accepted and every error's words stay encoding/json's.
// Text that is not UTF-8 is such a thing too: decodeRequest names the
// field that holds it. FuzzScanRequest holds the two to the same answers.

// scanRequest returns the request body holds if it is valid and within
// lim; ok is false when decodeRequest must decide.
func scanRequest(body []byte, lim Limits) (req Checked, ok bool) {
	if !jsonscan.ValidText(body) {
		return Checked{}, false
	}
	var seen uint32 // the checked members met so far, one bit each
	var sawModel, sawMessages bool
	ok = jsonscan.Members(body, jsonscan.SkipSpace(body, 0), func(key, val []byte) bool {
		bit, known := memberBits[string(key)]
		if !known {
			return true
		}
		if seen&bit != 0 {
			return false // encoding/json keeps the last; the slow path knows
		}
		seen |= bit
		switch string(key) {
		case "model":
			m, plain := plainString(val)
			if !plain || m == "" || !lim.serves(m) {
				return false
			}
			req.Model, sawModel = m, true
			return true
		case "messages":
			sawMessages = true
			return scanMessages(val, lim.MaxMessages)
		case "stream":
			switch string(val) {
			case "true":
				req.Stream = true
			case "false", "null":
			default:
				return false
			}
			return true
		case "n":
			return string(val) == "1" || string(val) == "null"
		case "max_tokens", "max_completion_tokens":
			return isNull(val) || maxTokensWithin(val, lim.MaxTokens)
		case "stream_options", "response_format":
			return isNull(val) || val[0] == '{'
		case "tools":
			return isNull(val) || val[0] == '['
		case "user":
			return isNull(val) || val[0] == '"'
		case "logprobs":
			return string(val) == "true" || string(val) == "false" || isNull(val)
		case "seed":
			return isNull(val) || isPlainInteger(val)
		case "stop":
			return isNull(val) || val[0] == '"' || stopArray(val)
		}
		for _, p := range numberParams {
			if p.name == string(key) {
				return isNull(val) || numberWithin(val, p)
			}
		}
		return false
	})
	if !ok || !sawModel || !sawMessages {
		return Checked{}, false
	}
	req.Body = bytes.TrimSpace(body)
	return req, true
}

// memberBits are the members scanRequest checks, each with its bit in
// seen.
var memberBits = func() map[string]uint32 {
	m := map[string]uint32{}
	for i, k := range []string{"model", "messages", "stream", "n", "max_tokens", "max_completion_tokens",
		"stream_options", "response_format", "tools", "user", "logprobs", "seed", "stop"} {
		m[k] = 1 << i
	}
	for i, p := range numberParams {
		m[p.name] = 1 << (13 + i)
	}
	return m
}()

// scanMessages accepts a non-empty array of at most max (negative: any)
// messages, each an object with a known role and the content it allows
// (checkMessages).
func scanMessages(val []byte, max int) bool {
	if val[0] != '[' {
		return false
	}
	n := 0
	ok := jsonscan.Elements(val, func(m []byte) bool {
		n++
		var role, content []byte
		var twice bool
		valid := jsonscan.Members(m, 0, func(key, v []byte) bool {
			switch string(key) {
			case "role":
				twice = twice || role != nil
				role = v
			case "content":
				twice = twice || content != nil
				content = v
			}
			return true
		})
		if !valid || twice {
			return false
		}
		r, ok := plainString(role)
		if !ok || !roles[r] {
			return false
		}
		switch {
		case content == nil || isNull(content):
			return r == "assistant"
		case content[0] == '"':
			return true
		case content[0] == '[':
			return jsonscan.Elements(content, partWithin)
		}
		return false
	})
	return ok && n > 0 && (max < 0 || n <= max)
}

// partWithin accepts a content part: an object with a non-empty type, and
// an image_url (which a part of that type must have) that imageWithin
// accepts (checkContent).
func partWithin(part []byte) bool {
	var typ, image []byte
	var twice bool
	valid := jsonscan.Members(part, 0, func(key, v []byte) bool {
		switch string(key) {
		case "type":
			twice = twice || typ != nil
			typ = v
		case "image_url":
			twice = twice || image != nil
			image = v
		}
		return true
	})
	t, ok := plainBytes(typ)
	if !valid || twice || !ok || len(t) == 0 {
		return false
	}
	if image == nil {
		return string(t) != "image_url"
	}
	return imageWithin(image)
}

// imageWithin accepts an image_url checkImage accepts: an object whose
// url, without escapes, AllowedImageURL accepts.
func imageWithin(val []byte) bool {
	if val[0] != '{' {
		return false
	}
	var url []byte
	var twice bool
	valid := jsonscan.Members(val, 0, func(key, v []byte) bool {
		if string(key) == "url" {
			twice = twice || url != nil
			url = v
		}
		return true
	})
	u, ok := plainBytes(url)
	return valid && !twice && ok && AllowedImageURL(u)
}

// plainString is the JSON string val without its quotes, if it has no
// escapes.
func plainString(val []byte) (string, bool) {
	b, ok := plainBytes(val)
	return string(b), ok
}

// plainBytes is plainString without the copy.
func plainBytes(val []byte) ([]byte, bool) {
	if len(val) < 2 || val[0] != '"' {
		return nil, false
	}
	if end, escaped := jsonscan.String(val, 0); end != len(val) || escaped {
		return nil, false
	}
	return val[1 : len(val)-1], true
}

// isPlainInteger reports that the JSON number val is an integer
// encoding/json decodes into an int64.
func isPlainInteger(val []byte) bool {
	_, err := strconv.ParseInt(string(val), 10, 64)
	return err == nil
}

// maxTokensWithin accepts a max_tokens that CheckMaxTokens accepts.
func maxTokensWithin(val []byte, limit int) bool {
	v, err := strconv.ParseInt(string(val), 10, 64)
	return err == nil && v >= 1 && (limit < 0 || v <= int64(limit))
}

// numberWithin accepts a sampling parameter checkNumber accepts.
func numberWithin(val []byte, p numberParam) bool {
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return false
	}
	v, err := strconv.ParseFloat(string(val), 64)
	return err == nil && v >= p.min && v <= p.max
}

// stopArray accepts an array of at most 4 strings or nulls (isStop).
func stopArray(val []byte) bool {
	if val[0] != '[' {
		return false
	}
	n := 0
	return jsonscan.Elements(val, func(e []byte) bool {
		n++
		return n <= 4 && (e[0] == '"' || isNull(e))
	})
}
