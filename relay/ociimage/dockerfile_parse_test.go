package ociimage_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its arguments, ARGs
// substituted.
type instruction struct {
	cmd  string // upper case: FROM, COPY, LABEL...
	args string
}

// stage is the instructions from one FROM to the next.
type stage struct {
	from string // the base, ARGs substituted ("scratch", "golang:1.26.8")
	name string // AS name
	ins  []instruction
}

// parseDockerfile reads the subset of the Dockerfile syntax the relay's
// uses: comments, line continuations, ARG with defaults (buildArgs
// override them, as --build-arg does), ${NAME} substitution.
func parseDockerfile(t *testing.T, path string, buildArgs map[string]string) []stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	args := map[string]string{} // in scope: the global ARGs, then the stage's
	global := map[string]string{}
	var line strings.Builder
	for _, raw := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(raw)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(trimmed)
		cmd, rest, _ := strings.Cut(strings.TrimSpace(line.String()), " ")
		line.Reset()
		cmd, rest = strings.ToUpper(cmd), strings.TrimSpace(rest)
		if cmd != "ARG" {
			rest = substitute(rest, args)
		}
		switch cmd {
		case "ARG":
			name, def, _ := strings.Cut(rest, "=")
			if v, ok := buildArgs[name]; ok {
				def = v
			} else if v, ok := global[name]; ok && def == "" {
				def = v
			}
			args[name] = strings.Trim(def, `"`)
			if len(stages) == 0 {
				global[name] = args[name]
			}
		case "FROM":
			from, name, _ := strings.Cut(rest, " AS ")
			stages = append(stages, stage{from: strings.TrimSpace(from), name: strings.TrimSpace(name)})
			args = map[string]string{}
		default:
			if len(stages) == 0 {
				t.Fatalf("%s before FROM", cmd)
			}
			s := &stages[len(stages)-1]
			s.ins = append(s.ins, instruction{cmd: cmd, args: rest})
		}
	}
	return stages
}

var argRef = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

func substitute(s string, args map[string]string) string {
	return argRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := argRef.FindStringSubmatch(ref)
		if v, ok := args[m[1]+m[2]]; ok {
			return v
		}
		return ref // not an ARG: left for the shell
	})
}

// all is the arguments of every instruction cmd of s.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// last is the arguments of the last instruction cmd of s (the one that
// takes effect), "" when there is none.
func (s stage) last(cmd string) string {
	all := s.all(cmd)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

// execForm decodes ENTRYPOINT or CMD in exec (JSON) form; the shell form
// would need a shell, which a scratch image lacks.
func execForm(t *testing.T, cmd, args string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("%s %s: not in exec form: %v", cmd, args, err)
	}
	return v
}

// labels decodes LABEL key="value" pairs, quotes optional.
func labels(t *testing.T, all []string) map[string]string {
	t.Helper()
	pair := regexp.MustCompile(`([\w.\-]+)=("(?:[^"\\]|\\.)*"|\S+)`)
	out := map[string]string{}
	for _, args := range all {
		rest := pair.ReplaceAllStringFunc(args, func(p string) string {
			m := pair.FindStringSubmatch(p)
			out[m[1]] = strings.Trim(m[2], `"`)
			return ""
		})
		if strings.TrimSpace(rest) != "" {
			t.Fatalf("LABEL %s: cannot read %q", args, rest)
		}
	}
	return out
}
