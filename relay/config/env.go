package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"
)

// # The environment
//
// RELAY_EDGE__LISTEN=… sets edge.listen: the prefix dropped, the rest
// lower-cased, "__" between the parts of a key. Only variables that name a
// key are read. Others that start with RELAY_ are common where no one chose
// them: Kubernetes injects RELAY_PORT, RELAY_SERVICE_HOST… into every pod
// of a namespace with a Service named relay, and configs/nats has the
// server's passwords exported as RELAY_NATS_<ROLE>_PASSWORD. They are
// ignored, and named in one warning (Config.IgnoredEnv): refusing them
// would stop every role from starting. A file or --set still refuses an
// unknown key.
//
// RELAY_NATS_EDGE_PASSWORD (WORKER, COORDINATOR) is the password of the
// role's own NATS user in configs/nats: the role uses it as nats.password
// when nats.user is set and nats.password is not.

// envLayer splits the RELAY_ variables of environ into the keys they set
// and those that set none, by name.
func envLayer(environ []string) (keys map[string]any, ignored map[string]string) {
	keys, ignored = map[string]any{}, map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		key := strings.ReplaceAll(strings.ToLower(rest), "__", ".")
		if !knownKey(reflect.TypeFor[Config](), strings.Split(key, ".")) {
			ignored[name] = value
			continue
		}
		keys[key] = value
	}
	return keys, ignored
}

// rolePasswordEnv is the variable configs/nats gives the password of
// role's NATS user; "" for a role without one.
func rolePasswordEnv(role Role) string {
	switch role {
	case RoleEdge, RoleWorker, RoleCoordinator, RoleSetup:
		return EnvPrefix + "NATS_" + strings.ToUpper(string(role)) + "_PASSWORD"
	}
	return ""
}

// knownKey reports whether path names a key of t, or lies under one that
// is a map (whose keys are free: coordinator.tenant_limits.<tenant>).
func knownKey(t reflect.Type, path []string) bool {
	for _, part := range path {
		switch t.Kind() {
		case reflect.Struct:
			f, ok := keyField(t, part)
			if !ok {
				return false
			}
			t = f
		case reflect.Map:
			t = t.Elem()
		default:
			return false
		}
	}
	return true
}

// keyField is the type of the field of struct t whose koanf key is name,
// looking into squashed (embedded) structs as the decoder does.
func keyField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		switch {
		case opts == "squash":
			if ft, ok := keyField(f.Type, name); ok {
				return ft, true
			}
		case !f.IsExported() || tag == "-":
		case strings.EqualFold(tag, name) || tag == "" && strings.EqualFold(f.Name, name):
			return f.Type, true
		}
	}
	return nil, false
}

// IgnoredEnv are the names of the RELAY_ variables that set no key, sorted;
// main warns of them once.
func (c Config) IgnoredEnv() []string { return c.ignoredEnv }

// ignoredNames are the names of ignored, sorted.
func ignoredNames(ignored map[string]string) []string {
	return slices.Sorted(maps.Keys(ignored))
}
