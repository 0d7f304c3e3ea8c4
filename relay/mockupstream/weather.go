package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Defaults of the zero Weather's durations.
const (
	DefaultWeatherRetryAfter = time.Second
	DefaultWeatherStallFor   = 30 * time.Second
)

// Weather is the ordinary misbehaviour of a provider, drawn anew for each
// chat request that carries no fault directive of its own (and when
// Config.Faults is empty): a share of the calls is answered 429 with a
// Retry-After, a share is cut mid-answer (the connection dropped after a
// random number of tokens), and a share stalls mid-answer. A test puts
// the relay and a direct client before the same weather and compares
// what each completes. The zero value is fair weather.
type Weather struct {
	// RateLimited is the share of calls answered 429 with RetryAfter.
	RateLimited float64 `koanf:"rate_limited" json:"rate_limited"`
	// RetryAfter is the 429s' Retry-After, in whole seconds (zero: 1s).
	RetryAfter time.Duration `koanf:"retry_after" json:"-"`
	// Cut is the share of streams whose connection drops after a random
	// number of content tokens, between the first and the last.
	Cut float64 `koanf:"cut" json:"cut"`
	// Stall is the share of streams that go silent for StallFor after a
	// random number of content tokens, then carry on.
	Stall float64 `koanf:"stall" json:"stall"`
	// StallFor is how long a stall lasts (zero: 30s).
	StallFor time.Duration `koanf:"stall_for" json:"-"`
}

// validate names the first invalid field.
func (w Weather) validate() error {
	for _, s := range []struct {
		name  string
		share float64
	}{{"rate_limited", w.RateLimited}, {"cut", w.Cut}, {"stall", w.Stall}} {
		if s.share < 0 || s.share > 1 {
			return fmt.Errorf("mock_upstream.weather.%s: must be between 0 and 1, got %v", s.name, s.share)
		}
	}
	switch {
	case w.RateLimited+w.Cut+w.Stall > 1:
		return fmt.Errorf("mock_upstream.weather: the shares add up to %v, more than 1", w.RateLimited+w.Cut+w.Stall)
	case w.RetryAfter < 0:
		return errors.New("mock_upstream.weather.retry_after: must not be negative")
	case w.StallFor < 0:
		return errors.New("mock_upstream.weather.stall_for: must not be negative")
	}
	return nil
}

// draw picks the faults of one call, for an answer of tokens tokens.
func (w Weather) draw(tokens int) (kind string, f faults) {
	u := rand.Float64()
	after := 1 + rand.IntN(max(tokens-1, 1))
	switch {
	case u < w.RateLimited:
		ra := w.RetryAfter
		if ra == 0 {
			ra = DefaultWeatherRetryAfter
		}
		secs := strconv.Itoa(int((ra + time.Second - 1) / time.Second))
		return "rate_limited", faults{spec: "weather: status=429, retry_after=" + secs, status: http.StatusTooManyRequests, retryAfter: secs}
	case u < w.RateLimited+w.Cut:
		return "cut", faults{spec: fmt.Sprintf("weather: cut_after=%d", after), end: endCut, endAfter: after}
	case u < w.RateLimited+w.Cut+w.Stall:
		stall := w.StallFor
		if stall == 0 {
			stall = DefaultWeatherStallFor
		}
		return "stall", faults{spec: fmt.Sprintf("weather: stall_after=%d, stall_for=%v", after, stall), stallAfter: after, stallFor: stall}
	}
	return "", faults{}
}

// SetWeather changes the weather of the calls to come; the zero Weather
// is fair weather.
func (s *Server) SetWeather(w Weather) error {
	if err := w.validate(); err != nil {
		return err
	}
	s.weather.Store(&w)
	return nil
}

// weatherJSON is Weather on the wire, its durations as Go duration
// strings ("1s").
type weatherJSON struct {
	Weather
	RetryAfter string `json:"retry_after,omitempty"`
	StallFor   string `json:"stall_for,omitempty"`
}

// handleWeather serves PUT /mock/weather: the body is the new weather, as
// JSON ({"cut":0.05,"stall":0.05,"rate_limited":0.03,"retry_after":"1s"});
// {} is fair weather. The answer is the weather now in force.
func (s *Server) handleWeather(w http.ResponseWriter, r *http.Request) {
	var in weatherJSON
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(&in)
	next := in.Weather
	for _, d := range []struct {
		text string
		into *time.Duration
	}{{in.RetryAfter, &next.RetryAfter}, {in.StallFor, &next.StallFor}} {
		if err == nil && d.text != "" {
			*d.into, err = time.ParseDuration(d.text)
		}
	}
	if err == nil {
		err = s.SetWeather(next)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest("mock-upstream: weather: "+err.Error(), ""))
		return
	}
	writeJSON(w, http.StatusOK, weatherJSON{Weather: next, RetryAfter: next.RetryAfter.String(), StallFor: next.StallFor.String()})
}
