// Package metrics defines every Prometheus metric family the relay
// exports, with their names, help texts and labels, in one place. Roles
// construct their families against a prometheus.Registerer they are
// handed (never the global registry) and record events through typed
// methods, so a label value always comes from a typed enum or from the
// configuration: never from a stream id, a model name a client or a
// provider typed, or any other unbounded text.
//
// The families, by role, are in relay/README.md's "Metrics" section, the
// operator's table.
//
// Provider and model label values are the configured names (see Names);
// anything else is counted as "other". Tenants are the configured tenant
// names, "default" for requests without one, "other" for the rest.
//
// Several roles may share one registry (`relay dev` runs them all in one
// process): a family that is already registered is reused.
package metrics
