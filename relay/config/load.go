package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Sources are the layers above the built-in defaults. main fills them from
// its flags and environment; tests fill them directly.
type Sources struct {
	// File is a YAML file; empty for none.
	File string
	// Overlays are YAML files merged over File in order (a repeated
	// --config): a key an overlay sets replaces the earlier value, a list
	// whole. They let the part of a configuration that is secret (the
	// edge's api_keys) come from a file of its own, mounted from a
	// Kubernetes Secret beside a ConfigMap.
	Overlays []string
	// Environ is the process environment (os.Environ()); only RELAY_
	// variables are read.
	Environ []string
	// Set holds key=value pairs from --set flags, applied last.
	Set []string
}

// EnvPrefix starts every environment variable the relay reads.
const EnvPrefix = "RELAY_"

// Load merges the layers into a Config and validates it for role.
func Load(src Sources, role Role) (Config, error) {
	k := koanf.New(".")
	for _, f := range append([]string{src.File}, src.Overlays...) {
		if f == "" {
			continue
		}
		if err := k.Load(file.Provider(f), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", f, err)
		}
	}
	envKeys, ignored := envLayer(src.Environ) // env.go
	if err := k.Load(confmap.Provider(envKeys, "."), nil); err != nil {
		return Config{}, fmt.Errorf("config: environment: %w", err)
	}
	set := map[string]any{}
	for _, kv := range src.Set {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return Config{}, fmt.Errorf("config: --set %q: want key=value", kv)
		}
		set[key] = value
	}
	if err := k.Load(confmap.Provider(set, "."), nil); err != nil {
		return Config{}, fmt.Errorf("config: --set: %w", err)
	}

	if password, ok := ignored[rolePasswordEnv(role)]; ok && k.String("nats.user") != "" && !k.Exists("nats.password") {
		if err := k.Set("nats.password", password); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		delete(ignored, rolePasswordEnv(role))
	}

	if role == RoleDev && !k.Exists("edge.demo") {
		// dev serves the demo chat unless told not to: edge.demo=false
		// makes it a plain relay in one process.
		if err := k.Set("edge.demo", true); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}

	var cfg Config
	err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		// koanf's own hooks are dropped with a custom decoder config, so
		// durations (stricter than koanf's: duration.go) and
		// comma-separated lists are added back here.
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			durationHook(),
			mapstructure.StringToSliceHookFunc(","),
			mapstructure.TextUnmarshallerHookFunc(),
		),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "koanf",
		Result:           &cfg,
	}})
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", explainDecodeError(err))
	}
	if err := cfg.Validate(role); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	cfg.ignoredEnv = ignoredNames(ignored)
	return cfg, nil
}

// explainDecodeError rewrites mapstructure's report so that each problem
// leads with the full path of its key: "'edge' has invalid keys: lisen"
// becomes "unknown key edge.lisen", and "'edge.keepalive' time: invalid
// duration" becomes "edge.keepalive: time: invalid duration".
func explainDecodeError(err error) error {
	var problems []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "decoding failed") {
			continue
		}
		name, rest := "", line
		if strings.HasPrefix(line, "'") {
			if end := strings.Index(line[1:], "'"); end >= 0 {
				name, rest = line[1:end+1], strings.TrimSpace(line[end+2:])
			}
		}
		keys, found := strings.CutPrefix(rest, "has invalid keys: ")
		if !found {
			if name != "" {
				rest = name + ": " + rest
			}
			problems = append(problems, rest)
			continue
		}
		for _, key := range strings.Split(keys, ", ") {
			if name != "" {
				key = name + "." + key
			}
			problems = append(problems, "unknown key "+key)
		}
	}
	if len(problems) == 0 {
		return err
	}
	return errors.New(strings.Join(problems, "; "))
}
