package chat

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// FinishReason of a done end frame; "stop" if the worker left it empty, so
// a finished answer never looks unfinished.
func FinishReason(f wire.Frame) string {
	if f.FinishReason == "" {
		return "stop"
	}
	return f.FinishReason
}

// EndError is the error of an end frame that is not done, with an HTTP
// status: the frame's own, or one made up from the terminal status.
func EndError(f wire.Frame) *wire.Error {
	var e wire.Error
	if f.Error != nil {
		e = *f.Error
	}
	if e.Type == "" {
		switch f.Status {
		case wire.StatusIncomplete:
			e.Type = wire.TypeIncomplete
		case wire.StatusCancelled:
			e.Type = wire.TypeCancelled
		default:
			e.Type = wire.TypeUpstream
		}
	}
	if e.Message == "" {
		e.Message = "the stream ended " + string(f.Status) + " before the answer was complete"
	}
	if e.Code == "" {
		e.Code = string(f.Status)
	}
	if e.Status < 400 || e.Status > 599 {
		e.Status = http.StatusBadGateway
	}
	return &e
}
