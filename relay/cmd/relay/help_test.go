package main

import (
	"bytes"
	"strings"
	"testing"
)

// `relay <role> --help` (and -h) prints the role's flags and succeeds.
func TestRoleHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"edge", "--help"}, {"worker", "-h"}, {"dev", "-help"}, {"keys", "check", "--help"}} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err != nil {
			t.Errorf("%q: %v", args, err)
		}
		if out := stdout.String(); !strings.Contains(out, "-config") || !strings.Contains(out, "-set") {
			t.Errorf("%q printed %q", args, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run([]string{"keys", "--help"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "relay keys check") {
		t.Errorf("keys --help: %v, stdout %q", err, stdout.String())
	}
	stdout.Reset()
	if err := run([]string{"edge", "--bogus"}, &stdout, &stderr); err == nil || !strings.Contains(stderr.String(), "-config") {
		t.Errorf("a bad flag: %v, stderr %q", err, stderr.String())
	}
}
