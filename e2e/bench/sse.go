package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// event is one SSE event of a chat completion stream, relay's or the fake
// upstream's, reduced to what the benchmark looks at.
type event struct {
	ID      string // the relay cursor ("" from the fake upstream)
	Done    bool   // data: [DONE]
	Content string // delta content
	Finish  string // finish_reason, on the last chunk
	Status  string // relay.status of the end event
	Attempt int    // relay.attempt: which upstream call produced a chunk
	Error   string // error.message of a failure event
}

// chunkData is the part of a chat.completion.chunk or error event decoded.
type chunkData struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Relay struct {
		Status  string `json:"status"`
		Attempt int    `json:"attempt"`
	} `json:"relay"`
}

// sseReader parses events with a small buffer: 10,000 concurrent streams
// are 10,000 of these in one process.
type sseReader struct {
	r    *bufio.Reader
	line []byte // a line longer than the buffer, assembled
}

const sseBuffer = 1024

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, sseBuffer)}
}

var errNoData = errors.New("event without data")

// next reads the next event with data, skipping comments and retry hints.
func (s *sseReader) next(ev *event) error {
	*ev = event{}
	var data []byte
	for {
		line, err := s.readLine()
		if err != nil {
			return err
		}
		switch {
		case len(line) == 0:
			if data != nil {
				return decodeData(data, ev)
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id:")):
			ev.ID = string(bytes.TrimSpace(line[3:]))
		case bytes.HasPrefix(line, []byte("data:")):
			// Events carry one data line each (relay and upstream alike).
			data = append(data[:0], bytes.TrimSpace(line[5:])...)
		}
	}
}

// readLine returns a line without its end; the slice is valid until the
// next call.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.r.ReadSlice('\n')
			s.line = append(s.line, line...)
		}
		line = s.line
	}
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

func decodeData(data []byte, ev *event) error {
	if len(data) == 0 {
		return errNoData
	}
	if string(data) == "[DONE]" {
		ev.Done = true
		return nil
	}
	var c chunkData
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	ev.Status, ev.Attempt = c.Relay.Status, c.Relay.Attempt
	if c.Error != nil {
		ev.Error = c.Error.Message
		return nil
	}
	if len(c.Choices) > 0 {
		ev.Content = c.Choices[0].Delta.Content
		if f := c.Choices[0].FinishReason; f != nil {
			ev.Finish = *f
		}
	}
	return nil
}
