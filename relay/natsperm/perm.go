// Package natsperm is the relay's NATS permission model, in one place:
// what each role's user may publish and subscribe to, per node when each
// node has its own identity. `relay nats users` renders it as a
// nats-server configuration (render.go), and configs/nats/accounts.conf is
// its rendering with one password user per role.
package natsperm

import (
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// Role is a NATS identity's job: the three relay roles, and Setup, the
// administrator that creates and updates the JetStream assets (relay
// setup).
type Role string

const (
	Edge        Role = "edge"
	Worker      Role = "worker"
	Coordinator Role = "coordinator"
	Setup       Role = "setup"
)

// Roles are the roles in the order a rendering lists them.
var Roles = []Role{Edge, Worker, Coordinator, Setup}

// Group is a list of subjects with the reason they are granted.
type Group struct {
	Why      string
	Subjects []string
}

// Permissions are one user's grants.
type Permissions struct {
	PublishAllow, PublishDeny, SubscribeAllow []Group
}

// InboxPrefix is where a node of role asks for its replies, and the only
// inbox its user may subscribe to: "_INBOX.<role>.<node>", or
// "_INBOX.<role>" for a role-wide user (node ""). natsconn.Config.ForRole
// uses it.
func InboxPrefix(role, node string) string {
	if node == "" {
		return "_INBOX." + role
	}
	return "_INBOX." + role + "." + wire.KeyToken(node)
}

// ValidNode refuses a node name that would not make one subject token
// as it stands (KeyToken would rewrite it, and the operator's names in
// the configuration would not match the grants).
func ValidNode(node string) error {
	if node == "" || wire.KeyToken(node) != node {
		return fmt.Errorf("node name %q: use letters, digits, '-' and '_' only", node)
	}
	return nil
}

// Options are what the permissions depend on besides role and node.
type Options struct {
	// HomeDomain is the JetStream domain of the home region, for the
	// servers of a region that is not the home ("" without regions, or in
	// the home): its roles then also get the grants of shared state kept
	// as the home's mirrors with an overlay (configs/regions).
	HomeDomain string
}

// For is the permissions of role's node under o; node "" is a user that
// every node of the role shares (its demand key and inbox are then the
// role's wildcards).
func For(role Role, node string, o Options) Permissions {
	switch role {
	case Edge:
		return withRegion(edge(node), o)
	case Worker:
		return withRegion(worker(node), o)
	case Coordinator:
		return withRegion(coordinator(node), o)
	case Setup:
		return setup(o)
	}
	panic("natsperm: unknown role " + string(role))
}

// chunkStreams are the chunk streams' names, of generations and of
// Durable Streams: a stream name is one token of an API subject, where no
// wildcard stands for part of it, so every grant on them names each
// partition.
func chunkStreams() []string {
	out := make([]string, wire.AllPartitions)
	for i := range out {
		out[i] = wire.ChunkStreamName(i)
	}
	return out
}

// generationChunks are the frames' subjects of the generations'
// partitions, which workers write, and durableChunks those of the
// Durable Streams' partitions, which edges write (wire's "Partitions").
func generationChunks() []string {
	out := make([]string, wire.MaxPartitions)
	for k := range out {
		out[k] = wire.ChunkSubjects(k)
	}
	return out
}

func durableChunks() []string {
	out := make([]string, wire.MaxPartitions)
	for k := range out {
		out[k] = wire.ChunkSubjects(wire.DurablePartition(k))
	}
	return out
}

// each is prefix+name+suffix for every name.
func each(prefix string, names []string, suffix string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n + suffix
	}
	return out
}

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// info is the stream lookups of buckets.
func info(buckets ...string) []string { return each("$JS.API.STREAM.INFO.KV_", buckets, "") }

// watch is what reading and watching bucket takes: lookup, direct gets, and
// the ordered consumer of a watch with its flow control.
func watch(bucket string) []string {
	s := "KV_" + bucket
	return []string{
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.DIRECT.GET." + s + ".>",
		"$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.FC." + s + ".>",
	}
}

// chunkReads reads frames: direct gets from any replica, and gets from
// each chunk stream's leader.
func chunkReads() []string {
	cs := chunkStreams()
	return join(each("$JS.API.DIRECT.GET.", cs, ""), each("$JS.API.DIRECT.GET.", cs, ".>"), each("$JS.API.STREAM.MSG.GET.", cs, ""))
}

// demandKey is the quota demand key of role's node, or of every node of
// the role.
func demandKey(role, node string) string {
	if node == "" {
		return "$KV.relay_quotas.demand." + role + ".*"
	}
	return "$KV.relay_quotas.demand." + role + "." + wire.KeyToken(node)
}

// gateSubject is the grant of an edge's report of its lines: its own
// node's, or any edge's when nodes share their role's user.
func gateSubject(node string) string {
	if node == "" {
		return wire.GateSubjects
	}
	return wire.GateSubject(wire.KeyToken(node))
}

// inbox is the subscription grant of role's node's replies.
func inbox(role, node string) Group {
	return Group{"Its own replies (JetStream API answers, pulls, watches, chunk reads).", []string{InboxPrefix(role, node) + ".>"}}
}

// withRegion adds to p, outside the home region, the grants of the shared
// buckets kept as the home's mirrors: each key p may write, also through
// the home's API (a mirror's writes go to its origin) and into the
// region's overlay (while the home is unreachable), and each shared bucket
// p reads, its overlay read and watched and the home's bucket read, to
// reconcile the overlay after a partition.
func withRegion(p Permissions, o Options) Permissions {
	if o.HomeDomain == "" {
		return p
	}
	home := "$JS." + o.HomeDomain + ".API."
	var writes, reads []string
	for _, subj := range Subjects(p.PublishAllow) {
		for _, b := range wire.SharedStateBuckets {
			if key, ok := strings.CutPrefix(subj, "$KV."+b+"."); ok {
				writes = append(writes, home+"$KV."+b+"."+key, "$KV."+b+"_overlay."+key)
			}
			if subj == "$JS.API.DIRECT.GET.KV_"+b+".>" {
				reads = append(reads, watch(b+"_overlay")...)
				reads = append(reads, home+"STREAM.INFO.KV_"+b, home+"DIRECT.GET.KV_"+b+".>")
			}
		}
	}
	p.PublishAllow = append(p.PublishAllow,
		Group{"Outside the home region, the same keys written through the home's API (" + o.HomeDomain + ") or, while it is unreachable, into the region's overlay.", writes},
		Group{"Outside the home region, the overlays read and watched, the home's buckets read to reconcile them.", reads})
	return p
}

// Deny lists back the most important refusals, so they hold even if an
// allow is widened later.
var (
	noChunks   = "relay.chunks.>"
	noRequests = "relay.requests"
)

func edge(node string) Permissions {
	const r = "edge"
	return Permissions{
		PublishAllow: []Group{
			{"Queue a generation, cancel one, say which edge serves a stream.", []string{"relay.requests", "relay.cancel.>", "relay.presence.>"}},
			{"Durable Streams' appends (relay/durable): frames on the chunk subjects of their own partitions (RELAY_CHUNKS_8 and up), each chained on the last; never a generation's.", durableChunks()},
			{"/v1/embeddings and /v1/completions forwarded to a worker, and generations offered to a worker with a free slot before they are queued.", []string{"relay.forward", "relay.offers"}},
			{"Stream metadata and Idempotency-Key records: create, update, read; a stream's metadata a replica missed confirmed with the bucket's leader.", []string{"$KV.relay_streams.>", "$KV.relay_idempotency.>", "$JS.API.DIRECT.GET.KV_relay_streams.>", "$JS.API.DIRECT.GET.KV_relay_idempotency.>", "$JS.API.STREAM.MSG.GET.KV_relay_streams"}},
			{"Look up the assets (read only).", join(
				[]string{"$JS.API.INFO", "$JS.API.STREAM.INFO.RELAY_REQUESTS", "$JS.API.CONSUMER.INFO.RELAY_REQUESTS.workers"},
				each("$JS.API.STREAM.INFO.", chunkStreams(), ""),
				info("relay_streams", "relay_handovers", "relay_idempotency", "relay_answers", "relay_leases", "relay_keys"),
			)},
			{"The key cursors are sealed with: created by the first edge that needs it, read from the bucket's leader.", []string{"$KV.relay_keys.cursor", "$JS.API.STREAM.MSG.GET.KV_relay_keys"}},
			{"Read frames: direct gets from any replica, a missed frame confirmed with the chunk stream's leader.", chunkReads()},
			{"The holds of requests in progress against a budget (hold.<tenant>[.<key>]), by compare-and-set; workers write the usage records.", []string{"$KV.relay_usage.hold.>"}},
			{"Its own quota demand, and its own report of the tenants' lines to the other edges.", []string{demandKey(r, node), gateSubject(node)}},
			{"Shared state, read and watched: breakers for fast refusals, everything for GET /v1/relay/status; the usage ledger for budgets and GET /v1/relay/usage.", join(
				watch("relay_quotas"), watch("relay_breakers"), watch("relay_pauses"), watch("relay_canaries"), watch("relay_health"), watch("relay_usage"),
				[]string{"$JS.API.DIRECT.GET.KV_relay_leases.>"},
			)},
		},
		PublishDeny: []Group{{"The generations' frames, and shared state only workers and the coordinator write.", join(generationChunks(), []string{
			"$KV.relay_answers.>", "$KV.relay_usage.usage.>", "$KV.relay_breakers.>", "$KV.relay_pauses.>",
			"$KV.relay_canaries.>", "$KV.relay_leases.>", "$KV.relay_health.>",
			"$KV.relay_quotas.share.>", "$KV.relay_quotas.limits", "$KV.relay_quotas.ttft",
		})}},
		SubscribeAllow: []Group{
			inbox(r, node),
			{"Frames as stored, presence, the dashboard's list of workers and the tenants' shares, the answers of forwarded requests, the other edges' lines.", []string{"relay.live.>", "relay.presence.>", "relay.liveness", "relay.forward.reply.>", wire.GateSubjects}},
		},
	}
}

func worker(node string) Permissions {
	const r = "worker"
	return Permissions{
		PublishAllow: []Group{
			{"The generations' frames (never a Durable Stream's), the answers of forwarded requests, heartbeats, and deliveries of offered requests passed on to the worker that took them.", join(generationChunks(), []string{"relay.forward.reply.>", "relay.liveness", "relay.adopt.>"})},
			{"The shared pull consumer: fetch, then ack, nak, term or in-progress.", []string{"$JS.API.CONSUMER.MSG.NEXT.RELAY_REQUESTS.workers", "$JS.ACK.RELAY_REQUESTS.workers.>", "$JS.API.CONSUMER.INFO.RELAY_REQUESTS.workers"}},
			{"Look up the assets (read only).", join(
				[]string{"$JS.API.INFO", "$JS.API.STREAM.INFO.RELAY_REQUESTS"},
				each("$JS.API.STREAM.INFO.", chunkStreams(), ""),
				info("relay_streams", "relay_handovers", "relay_idempotency", "relay_answers", "relay_leases", "relay_usage", "relay_keys"),
			)},
			{"Handovers recorded once; answers kept by a model's cache, read back; the usage record of a stream it ended.", []string{
				"$KV.relay_handovers.>", "$JS.API.DIRECT.GET.KV_relay_handovers.>",
				"$KV.relay_answers.>", "$JS.API.DIRECT.GET.KV_relay_answers.>",
				"$KV.relay_usage.usage.>", "$JS.API.DIRECT.GET.KV_relay_usage.>",
			}},
			{"The liveness watcher's echo to itself, its request for full heartbeats, its probe of a silent worker.", []string{"relay.liveness.echo.*", "relay.liveness.sync", "relay.liveness.probe.*"}},
			{"History of a stream it takes over, where a refused batch left its streams; metadata read only.", join(chunkReads(), []string{"$JS.API.DIRECT.GET.KV_relay_streams.>"})},
			{"Breaker transitions, pauses, and its own quota demand.", []string{"$KV.relay_breakers.>", "$KV.relay_pauses.>", demandKey(r, node)}},
			{"Shared state, read and watched.", join(watch("relay_breakers"), watch("relay_pauses"), watch("relay_quotas"), watch("relay_canaries"), watch("relay_health"))},
		},
		PublishDeny: []Group{{"Requests, Durable Streams' frames, stream metadata, and shared state the coordinator writes.", join([]string{noRequests}, durableChunks(), []string{
			"$KV.relay_streams.>", "$KV.relay_idempotency.>", "$KV.relay_canaries.>", "$KV.relay_leases.>",
			"$KV.relay_health.>", "$KV.relay_quotas.share.>", "$KV.relay_quotas.limits", "$KV.relay_quotas.ttft",
		})}},
		SubscribeAllow: []Group{
			inbox(r, node),
			{"Cancellations, heartbeats and the liveness watcher's subjects, forwarded requests and offers (queue groups relay-forward, relay-offers), deliveries passed on to it.", []string{
				"relay.cancel.>", "relay.liveness", "relay.liveness.echo.*", "relay.liveness.sync", "relay.liveness.probe.*", "relay.forward", "relay.offers", "relay.adopt.>",
			}},
		},
	}
}

func coordinator(node string) Permissions {
	const r = "coordinator"
	return Permissions{
		PublishAllow: []Group{
			{"Look up the assets (read only): relay setup creates and updates them.", join(
				[]string{"$JS.API.INFO", "$JS.API.STREAM.INFO.RELAY_REQUESTS", "$JS.API.CONSUMER.INFO.RELAY_REQUESTS.workers"},
				each("$JS.API.STREAM.INFO.", chunkStreams(), ""),
				info(assetBuckets...),
			)},
			{"Evening out the chunk streams' leaders over the servers.", each("$JS.API.STREAM.LEADER.STEPDOWN.", chunkStreams(), "")},
			{"Handing a silent worker's delivery over: record it, then NAK it.", []string{"$KV.relay_handovers.>", "$JS.API.DIRECT.GET.KV_relay_handovers.>", "$JS.ACK.RELAY_REQUESTS.workers.>"}},
			{"The liveness watcher's echo, request for full heartbeats and probe of a silent worker.", []string{"relay.liveness.echo.*", "relay.liveness.sync", "relay.liveness.probe.*"}},
			{"Shared state it owns: the lease, provider health, quota shares, limits and first-token times, canary ramps, breakers of idle providers it probes.", []string{
				"$KV.relay_leases.coordinator", "$KV.relay_health.>", "$KV.relay_quotas.share.*", "$KV.relay_quotas.limits",
				"$KV.relay_quotas.ttft", "$KV.relay_canaries.>", "$KV.relay_breakers.>",
			}},
			{"Shared state, read and watched.", join(
				[]string{"$JS.API.DIRECT.GET.KV_relay_leases.>"},
				watch("relay_health"), watch("relay_quotas"), watch("relay_canaries"), watch("relay_breakers"), watch("relay_pauses"),
			)},
		},
		PublishDeny: []Group{{"Requests, frames, stream metadata, pauses, demand; and any change of a stream's or consumer's configuration.", []string{
			noRequests, noChunks, "$KV.relay_streams.>", "$KV.relay_idempotency.>", "$KV.relay_answers.>",
			"$KV.relay_pauses.>", "$KV.relay_quotas.demand.>", "$KV.relay_usage.>",
			"$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>",
			"$JS.API.CONSUMER.CREATE.RELAY_REQUESTS.>", "$JS.API.CONSUMER.DURABLE.CREATE.>",
		}}},
		SubscribeAllow: []Group{
			inbox(r, node),
			{"Heartbeats and the liveness watcher's echo.", []string{"relay.liveness", "relay.liveness.echo.*"}},
		},
	}
}

// assetBuckets are the buckets relay setup creates (streams.Setup).
var assetBuckets = []string{
	"relay_streams", "relay_health", "relay_handovers", "relay_idempotency", "relay_answers",
	"relay_breakers", "relay_pauses", "relay_quotas", "relay_canaries", "relay_leases", "relay_usage", "relay_keys",
}

func setup(o Options) Permissions {
	streams := join([]string{"RELAY_REQUESTS"}, chunkStreams(), each("KV_", assetBuckets, ""))
	allow := []Group{
		{"Create, update and look up the streams, the worker consumer and the buckets (streams.Setup).", join(
			[]string{"$JS.API.INFO"},
			each("$JS.API.STREAM.CREATE.", streams, ""),
			each("$JS.API.STREAM.UPDATE.", streams, ""),
			each("$JS.API.STREAM.INFO.", streams, ""),
			[]string{"$JS.API.CONSUMER.CREATE.RELAY_REQUESTS.workers", "$JS.API.CONSUMER.INFO.RELAY_REQUESTS.workers"},
		)},
	}
	if o.HomeDomain != "" {
		var subs []string
		for _, b := range wire.SharedStateBuckets {
			ov := "KV_" + b + "_overlay"
			subs = append(subs,
				"$JS.API.STREAM.CREATE."+ov, "$JS.API.STREAM.UPDATE."+ov, "$JS.API.STREAM.INFO."+ov,
				"$JS.API.STREAM.DELETE.KV_"+b,
				"$JS."+o.HomeDomain+".API.STREAM.INFO.KV_"+b,
			)
		}
		allow = append(allow, Group{"Outside the home region: each shared bucket becomes the home's mirror (a plain one is replaced), with its overlay.", subs})
	}
	return Permissions{
		PublishAllow: allow,
		PublishDeny: []Group{{"It sets up; it reads and writes no data.", []string{
			noRequests, noChunks, "$KV.>", "$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>", "$JS.API.STREAM.PURGE.>", "$JS.API.CONSUMER.MSG.NEXT.>",
		}}},
		SubscribeAllow: []Group{inbox(string(Setup), "")},
	}
}

// Subjects is every subject of gs, in order.
func Subjects(gs []Group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Subjects...)
	}
	return out
}

// describe names a user for a comment.
func describe(role Role, node string) string {
	if node == "" {
		return "every " + string(role)
	}
	return strings.TrimSpace(string(role) + " " + node)
}
