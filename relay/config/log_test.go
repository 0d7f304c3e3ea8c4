package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A duration in a log line reads as a Go duration string, in JSON as in
// text, inside groups too: never as a count of nanoseconds.
func TestLogWritesDurationsAsStrings(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		logger := slog.New(LogConfig{Format: format}.Handler(&buf))
		logger.Info("job finished", "duration", 1500*time.Millisecond, slog.Group("call", slog.Duration("ttft", 350*time.Millisecond)), "chunks", 3)
		line := buf.String()
		if format == "text" {
			for _, want := range []string{"duration=1.5s", "call.ttft=350ms", "chunks=3"} {
				if !strings.Contains(line, want) {
					t.Errorf("text line %q lacks %s", line, want)
				}
			}
			continue
		}
		var got struct {
			Duration any `json:"duration"`
			Call     struct {
				TTFT any `json:"ttft"`
			} `json:"call"`
			Chunks any `json:"chunks"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if got.Duration != "1.5s" || got.Call.TTFT != "350ms" || got.Chunks != float64(3) {
			t.Errorf("json line %s: duration %v, call.ttft %v, chunks %v; want 1.5s, 350ms, 3", line, got.Duration, got.Call.TTFT, got.Chunks)
		}
	}
}
