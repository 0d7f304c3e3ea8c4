package liveness

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestVerdictIsLoggedByName(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "probe", verdictMute)
	if !strings.Contains(buf.String(), `"probe":"no answer"`) {
		t.Fatalf("logged %s, want the verdict's name", buf.String())
	}
}
