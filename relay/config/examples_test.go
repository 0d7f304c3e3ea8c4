package config

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
		{"example secret", Sources{File: example}, RoleEdge,
			"edge.resume_token_secret: an example secret configs/edge.yaml publishes; anyone can forge resume tokens with it: generate one of your own (`openssl rand -hex 32`"},
		{"example key", Sources{File: example, Set: []string{fresh}}, RoleEdge,
			"edge.api_keys[0].key_sha256: the hash of sk-relay-example-acme, an example key configs/edge.yaml publishes; anyone can use it: generate a key of your own"},
		{"own credentials", Sources{File: example, Overlays: []string{ownCredentials(t)}}, RoleEdge, ""},
		{"relay dev", Sources{File: example}, RoleDev, ""},
		{"a local demo", Sources{File: example, Set: []string{"edge.allow_example_credentials=true"}}, RoleEdge, ""},
		{"compose's secret", Sources{File: filepath.Join("..", "..", "configs", "compose", "edge.yaml"),
			Set: []string{"edge.allow_example_credentials=false"}}, RoleEdge, "edge.resume_token_secret: an example secret configs/compose/edge.yaml publishes"},
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

// Every credential on the lists, the test and CI ones included, is
// refused by an edge with otherwise fresh credentials, with an error that
// names the setting and how to make one, and accepted where the
// deployment says it is a demo or a test.
func TestPublishedCredentialsRefused(t *testing.T) {
	example := filepath.Join("..", "..", "configs", "edge.yaml")
	own := ownCredentials(t)
	check := func(t *testing.T, src Sources, want string) {
		t.Helper()
		if _, err := Load(src, RoleEdge); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "generate") {
			t.Errorf("err = %v, want it to name %q and say how to generate one", err, want)
		}
		src.Set = append(src.Set, "edge.allow_example_credentials=true")
		if _, err := Load(src, RoleEdge); err != nil {
			t.Errorf("with edge.allow_example_credentials: %v", err)
		}
	}
	for secret := range publishedSecrets {
		t.Run(secret, func(t *testing.T) {
			check(t, Sources{File: example, Overlays: []string{own}, Set: []string{"edge.resume_token_secret=" + secret}}, "edge.resume_token_secret: ")
		})
	}
	for key := range publishedKeys {
		t.Run(key, func(t *testing.T) {
			// Upper case, as sha256sum does not write it: hex is hex.
			keys := writeFile(t, fmt.Sprintf("edge:\n  api_keys:\n    - {tenant: acme, key_sha256: %X, operator: true}\n", sha256.Sum256([]byte(key))))
			check(t, Sources{File: example, Overlays: []string{own, keys}}, "edge.api_keys[0].key_sha256: the hash of "+key+", ")
		})
	}
}

// credentialPatterns find credentials in published text, the value in
// the first group: client keys and their hashes, resume token secrets,
// NATS passwords and tokens.
var credentialPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"key hash", regexp.MustCompile(`key_sha256["']?\s*[:=]\s*["']?([0-9a-fA-F]{64})\b`)},
	{"key", regexp.MustCompile(`(?:Bearer |metricsKey:\s*|x-api-key:\s*)["']?([^\s"'\\]+)`)},
	{"resume token secret", regexp.MustCompile(`(?i)(?:resume_token_secret|resumeTokenSecret)["']?\s*[:=]\s*["']?([^\s"',}#]+)`)},
	{"NATS password or token", regexp.MustCompile(`(?i)(?:password|\btoken)["']?\s*[:=]\s*["']?([^\s"',}#]+)`)},
}

// placeholder reports whether v stands for a value to fill in ("$KEY",
// "<key>", "...", "$(openssl rand -hex 32)", "KEY") rather than being one.
func placeholder(v string) bool {
	return v == "" || strings.ContainsAny(v[:1], "$<.({*") || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == ""
}

// TestPublishedCredentialsAreListed reads every file of configs/ and the
// code blocks of every Markdown file of the repository for credentials,
// and fails on one the refusal does not know: a new published example
// must join publishedKeys or publishedSecrets, so that no edge can run
// with it. The relay does not refuse NATS passwords: examples take them
// from the environment.
func TestPublishedCredentialsAreListed(t *testing.T) {
	root := filepath.Join("..", "..")
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Hidden folders (.git) and the npm packages the e2e tests
			// install are not the repository's.
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		markdown := strings.HasSuffix(path, ".md")
		inConfigs := strings.HasPrefix(rel, "configs"+string(filepath.Separator)) &&
			!strings.HasSuffix(path, ".go") && d.Name() != "go.mod" && d.Name() != "go.sum"
		if !markdown && !inConfigs {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		if markdown {
			text = codeBlocks(text)
		}
		for _, p := range credentialPatterns {
			for _, m := range p.re.FindAllStringSubmatch(text, -1) {
				v := m[1]
				if placeholder(v) {
					continue
				}
				found++
				if p.kind == "NATS password or token" {
					t.Errorf("%s publishes a NATS password or token, %q: take it from the environment ($RELAY_NATS_…), as the examples do", rel, v)
				} else if !refused(p.kind, v) {
					t.Errorf("%s publishes a %s, %q, which relay/config/examples.go does not refuse: add it there", rel, p.kind, v)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no published credential found: the patterns no longer match the examples")
	}
}

// refused reports whether the published credential v, of a kind of
// credentialPatterns, is on the lists refusePublishedCredentials reads.
func refused(kind, v string) bool {
	switch kind {
	case "key hash":
		_, ok := publishedKeyHashes[strings.ToLower(v)]
		return ok
	case "key":
		_, ok := publishedKeys[v]
		return ok
	default:
		_, ok := publishedSecrets[v]
		return ok
	}
}

// codeBlocks is the fenced code of a Markdown text, the rest blanked.
func codeBlocks(md string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if in {
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
