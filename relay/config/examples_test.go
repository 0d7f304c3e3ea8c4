package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// configs/edge.yaml deployed unchanged does not start: its example secret
// and then its example keys are refused by name, outside `relay dev` only.
func TestExampleCredentialsRefused(t *testing.T) {
	example := filepath.Join("..", "..", "configs", "edge.yaml")
	fresh := "edge.resume_token_secret=" + strings.Repeat("f1", 32)
	for _, tc := range []struct {
		name string
		src  Sources
		role Role
		want string // "" for success
	}{
		{"example secret", Sources{File: example}, RoleEdge, "edge.resume_token_secret: the published example secret"},
		{"example key", Sources{File: example, Set: []string{fresh}}, RoleEdge,
			"edge.api_keys[0].key_sha256: the hash of the published example key sk-relay-example-acme"},
		{"own credentials", Sources{File: example, Overlays: []string{ownCredentials}}, RoleEdge, ""},
		{"relay dev", Sources{File: example}, RoleDev, ""},
		{"a local demo", Sources{File: example, Set: []string{"edge.allow_example_credentials=true"}}, RoleEdge, ""},
		{"compose's secret", Sources{File: filepath.Join("..", "..", "configs", "compose", "edge.yaml"),
			Set: []string{"edge.allow_example_credentials=false"}}, RoleEdge, "edge.resume_token_secret: the published example secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.src, tc.role)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// Every example key hash configs/ ships is one refusal knows.
func TestExampleKeyHashesAreTheShippedOnes(t *testing.T) {
	for _, file := range []string{"edge.yaml", filepath.Join("compose", "edge.yaml")} {
		cfg, err := Load(Sources{File: filepath.Join("..", "..", "configs", file)}, RoleDev)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range cfg.Edge.APIKeys {
			if _, ok := exampleKeyHashes[k.KeySHA256]; !ok {
				t.Errorf("%s: edge.api_keys[%d] is not the hash of an example key %v", file, i, exampleKeys)
			}
		}
		if !strings.Contains(fmt.Sprint(exampleSecrets), cfg.Edge.ResumeTokenSecret) {
			t.Errorf("%s: its resume_token_secret is not one of exampleSecrets", file)
		}
	}
}
