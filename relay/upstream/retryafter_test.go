package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{name: "none", want: 0},
		{name: "seconds", h: map[string]string{"Retry-After": "7"}, want: 7 * time.Second},
		{name: "fractional seconds", h: map[string]string{"Retry-After": " 1.5 "}, want: 1500 * time.Millisecond},
		{name: "http date", h: map[string]string{"Retry-After": date(90 * time.Second)}, want: 90 * time.Second},
		{
			name: "http date against Date header",
			h:    map[string]string{"Retry-After": date(time.Hour + 30*time.Second), "Date": date(time.Hour)},
			want: 30 * time.Second,
		},
		{name: "date in the past", h: map[string]string{"Retry-After": date(-time.Minute)}, want: 0},
		{name: "milliseconds", h: map[string]string{"retry-after-ms": "250"}, want: 250 * time.Millisecond},
		{name: "ms larger wins", h: map[string]string{"Retry-After": "1", "retry-after-ms": "1500"}, want: 1500 * time.Millisecond},
		{name: "seconds larger wins", h: map[string]string{"Retry-After": "2", "retry-after-ms": "1500"}, want: 2 * time.Second},
		{name: "garbage ignored", h: map[string]string{"Retry-After": "soon", "retry-after-ms": "x"}, want: 0},
		{name: "negative ignored", h: map[string]string{"Retry-After": "-5"}, want: 0},
		{name: "NaN ignored", h: map[string]string{"Retry-After": "NaN"}, want: 0},
		{name: "capped", h: map[string]string{"Retry-After": "999999999999"}, want: maxRetryAfter},
		{name: "far date capped", h: map[string]string{"Retry-After": date(72 * time.Hour)}, want: maxRetryAfter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tc.want {
				t.Fatalf("retryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}
