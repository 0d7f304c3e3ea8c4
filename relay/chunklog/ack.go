package chunklog

import (
	"encoding/json"
	"math"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/jsonscan"
	"github.com/relaydev/relay/relay/wire"
)

// pubAck is JetStream's reply to a publish: where the message was stored,
// or, with Error, why it was not (then Stream is still set, Seq is 0).
type pubAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Domain    string              `json:"domain"`
	Duplicate bool                `json:"duplicate"`
	Error     *jetstream.APIError `json:"error"`
	// Batch and Count name an atomic batch and its size, in the ack of
	// its commit (commit.go).
	Batch string `json:"batch"`
	Count int    `json:"count"`
}

// parseAck decodes a publish reply into what encoding/json would make of
// it. A reply is decoded for every chunk a worker stores, and
// encoding/json took about a third of the CPU of PublishMsg, the request
// included (BenchmarkAppend's profile); the replies the server sends are
// a handful of flat fields, which scanAck reads directly. Whatever scanAck does not know
// (an unknown or repeated key, an escape, a non-ASCII byte, a null, a
// number it would have to think about) goes to encoding/json, so a newer
// server's reply costs more but never means something else.
func parseAck(data []byte) (pubAck, error) {
	if a, ok := scanAck(data); ok {
		return a, nil
	}
	var a pubAck
	err := json.Unmarshal(data, &a)
	return a, err
}

// result is the stored sequence, or the error nats.go's PublishMsg gives
// for the reply: the server's API error (so errors.Is against
// jetstream.ErrStreamNotFound and the like works), or ErrInvalidJSAck for
// a reply that names no stream.
func (a pubAck) result() (uint64, error) {
	switch {
	case a.Error != nil:
		return 0, a.Error
	case a.Stream == "":
		return 0, jetstream.ErrInvalidJSAck
	}
	return a.Seq, nil
}

// Keys of the objects scanAck reads, as bits of the set of keys seen.
const (
	keyStream = 1 << iota
	keySeq
	keyDomain
	keyDuplicate
	keyError
	keyCode
	keyErrCode
	keyDescription
	keyBatch
	keyCount
)

// scanAck reads data if it is a JSON object of pubAck's keys only, each at
// most once, with ASCII strings without escapes, non-negative integers
// without exponent or fraction, and booleans; ok is false otherwise.
func scanAck(data []byte) (a pubAck, ok bool) {
	s := ackScanner{b: data}
	ok = s.object(func(key int) bool {
		switch key {
		case keyStream:
			a.Stream, ok = s.str()
		case keySeq:
			a.Seq, ok = s.uint(math.MaxUint64)
		case keyDomain:
			a.Domain, ok = s.str()
		case keyDuplicate:
			a.Duplicate, ok = s.boolean()
		case keyBatch:
			a.Batch, ok = s.str()
		case keyCount:
			var n uint64
			n, ok = s.uint(math.MaxInt32)
			a.Count = int(n)
		case keyError:
			a.Error = &jetstream.APIError{}
			ok = s.object(func(key int) bool { return s.apiErrorField(key, a.Error) })
		default:
			return false
		}
		return ok
	})
	return a, ok && s.end()
}

// ackScanner reads a JSON text from b[i:]. Its strings and numbers are
// narrower than package jsonscan's (printable ASCII without escapes;
// integers bounded as their digits are read), so it reads them itself and
// stops at the first byte outside them, rather than scan with jsonscan and
// check again.
type ackScanner struct {
	b []byte
	i int
}

// object reads an object, calling field with each key after its colon;
// field reads the value.
func (s *ackScanner) object(field func(key int) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	seen := 0
	for {
		k, ok := s.key()
		if !ok || seen&k != 0 || !s.next(':') || !field(k) {
			return false
		}
		seen |= k
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// apiErrorField reads the value of key into e.
func (s *ackScanner) apiErrorField(key int, e *jetstream.APIError) bool {
	var ok bool
	switch key {
	case keyCode:
		var n uint64
		n, ok = s.uint(math.MaxInt)
		e.Code = int(n)
	case keyErrCode:
		var n uint64
		n, ok = s.uint(math.MaxUint16)
		e.ErrorCode = jetstream.ErrorCode(n)
	case keyDescription:
		e.Description, ok = s.str()
	}
	return ok
}

// key reads an object key: one of the known ones, else 0 and false.
func (s *ackScanner) key() (int, bool) {
	k, ok := s.raw()
	if !ok {
		return 0, false
	}
	switch string(k) {
	case "stream":
		return keyStream, true
	case "seq":
		return keySeq, true
	case "domain":
		return keyDomain, true
	case "duplicate":
		return keyDuplicate, true
	case "error":
		return keyError, true
	case "code":
		return keyCode, true
	case "err_code":
		return keyErrCode, true
	case "description":
		return keyDescription, true
	case "batch":
		return keyBatch, true
	case "count":
		return keyCount, true
	}
	return 0, false
}

// str reads a string as raw does. A chunk stream's name, in every ack,
// costs no allocation.
func (s *ackScanner) str() (string, bool) {
	v, ok := s.raw()
	for _, name := range chunkStreams {
		if string(v) == name {
			return name, ok
		}
	}
	return string(v), ok
}

// chunkStreams are the names of every partition's chunk stream, of
// generations and of Durable Streams.
var chunkStreams = func() (names [wire.AllPartitions]string) {
	for k := range names {
		names[k] = wire.ChunkStreamName(k)
	}
	return names
}()

// raw reads a string of printable ASCII without escapes.
func (s *ackScanner) raw() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// uint reads a non-negative integer up to max, written as JSON writes it
// (no leading zero, sign, fraction or exponent).
func (s *ackScanner) uint(max uint64) (uint64, bool) {
	s.space()
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	digits := s.i - start
	if digits == 0 || digits > 1 && s.b[start] == '0' {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return n, true
}

// boolean reads true or false.
func (s *ackScanner) boolean() (bool, bool) {
	s.space()
	for _, lit := range [...]string{"true", "false"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// next skips white space and then c, if c is next.
func (s *ackScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *ackScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *ackScanner) space() { s.i = jsonscan.SkipSpace(s.b, s.i) }
