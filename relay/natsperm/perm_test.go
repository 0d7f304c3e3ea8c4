package natsperm

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// matches reports whether subject matches the NATS filter (with * and >).
func matches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

func anyMatch(filters []string, subject string) bool {
	for _, f := range filters {
		if matches(f, subject) {
			return true
		}
	}
	return false
}

// mayPublish and maySubscribe are what the server decides: allowed by an
// allow and by no deny.
func mayPublish(p Permissions, subject string) bool {
	return anyMatch(Subjects(p.PublishAllow), subject) && !anyMatch(Subjects(p.PublishDeny), subject)
}

func maySubscribe(p Permissions, subject string) bool {
	return anyMatch(Subjects(p.SubscribeAllow), subject)
}

func expect(t *testing.T, who string, got, want bool, what string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %s: got %v, want %v", who, what, got, want)
	}
}

// A node's user writes its own quota demand key and reads its own replies,
// no other node's; a user its role's nodes share may write any of the
// role's demand keys and read the role's replies.
func TestPermissionsPerNode(t *testing.T) {
	for _, role := range []Role{Edge, Worker} {
		r := string(role)
		own := For(role, "n1", Options{})
		expect(t, r+" n1", mayPublish(own, "$KV.relay_quotas.demand."+r+".n1"), true, "write its own demand")
		expect(t, r+" n1", mayPublish(own, "$KV.relay_quotas.demand."+r+".n2"), false, "write another node's demand")
		expect(t, r+" n1", maySubscribe(own, "_INBOX."+r+".n1.abc"), true, "its own inbox")
		expect(t, r+" n1", maySubscribe(own, "_INBOX."+r+".n2.abc"), false, "another node's inbox")
		expect(t, r+" n1", maySubscribe(own, "_INBOX."+r+".>"), false, "the role's whole inbox")
		shared := For(role, "", Options{})
		expect(t, "every "+r, mayPublish(shared, "$KV.relay_quotas.demand."+r+".n2"), true, "write a node's demand")
		expect(t, "every "+r, maySubscribe(shared, "_INBOX."+r+".n2.abc"), true, "a node's inbox")
	}
	if got := InboxPrefix("edge", "n1"); got != "_INBOX.edge.n1" {
		t.Errorf("InboxPrefix = %q", got)
	}
}

// Only the setup identity changes a stream's or consumer's configuration;
// it reads and writes no data.
func TestPermissionsOnlySetupConfigures(t *testing.T) {
	assets := append(append([]string{"RELAY_REQUESTS"}, chunkStreams()...), each("KV_", assetBuckets, "")...)
	for _, role := range []Role{Edge, Worker, Coordinator} {
		p := For(role, "n1", Options{HomeDomain: "a"})
		for _, a := range assets {
			for _, op := range []string{"CREATE", "UPDATE", "DELETE", "PURGE"} {
				expect(t, string(role), mayPublish(p, "$JS.API.STREAM."+op+"."+a), false, op+" "+a)
			}
		}
		expect(t, string(role), mayPublish(p, "$JS.API.CONSUMER.CREATE.RELAY_REQUESTS.workers"), false, "create the worker consumer")
		expect(t, string(role), mayPublish(p, "$JS.API.CONSUMER.CREATE.RELAY_REQUESTS.snoop"), false, "create a consumer of the queue")
	}
	s := For(Setup, "", Options{})
	for _, a := range assets {
		expect(t, "setup", mayPublish(s, "$JS.API.STREAM.CREATE."+a), true, "create "+a)
		expect(t, "setup", mayPublish(s, "$JS.API.STREAM.UPDATE."+a), true, "update "+a)
	}
	expect(t, "setup", mayPublish(s, "$JS.API.CONSUMER.CREATE.RELAY_REQUESTS.workers"), true, "create the worker consumer")
	for _, subj := range []string{"$KV.relay_leases.coordinator", "$JS.API.DIRECT.GET.RELAY_CHUNKS", "$JS.API.CONSUMER.MSG.NEXT.RELAY_REQUESTS.workers", "relay.requests", "$JS.API.STREAM.PURGE.RELAY_REQUESTS"} {
		expect(t, "setup", mayPublish(s, subj), false, subj)
	}
}

// Outside the home region a node writes, through the home's API and into
// the overlays, exactly the shared keys it writes at home.
func TestPermissionsRegionKeys(t *testing.T) {
	o := Options{HomeDomain: "a"}
	for _, c := range []struct {
		role       Role
		owned, not []string // keys as "<bucket>.<key>"
	}{
		{Edge, []string{"relay_quotas.demand.edge.n1"}, []string{"relay_quotas.demand.edge.n2", "relay_quotas.share.n1", "relay_quotas.limits", "relay_breakers.mock", "relay_leases.coordinator"}},
		{Worker, []string{"relay_breakers.mock", "relay_pauses.mock", "relay_quotas.demand.worker.n1"}, []string{"relay_quotas.demand.worker.n2", "relay_canaries.m", "relay_leases.coordinator", "relay_health.mock"}},
		{Coordinator, []string{"relay_leases.coordinator", "relay_health.mock", "relay_quotas.share.n2", "relay_canaries.m"}, []string{"relay_pauses.mock", "relay_quotas.demand.edge.n1", "relay_leases.other"}},
	} {
		p := For(c.role, "n1", o)
		for _, k := range c.owned {
			b, key, _ := strings.Cut(k, ".")
			expect(t, string(c.role), mayPublish(p, "$JS.a.API.$KV."+k), true, "write "+k+" in the home")
			expect(t, string(c.role), mayPublish(p, "$KV."+b+"_overlay."+key), true, "write "+k+" in the overlay")
		}
		for _, k := range c.not {
			b, key, _ := strings.Cut(k, ".")
			expect(t, string(c.role), mayPublish(p, "$JS.a.API.$KV."+k), false, "write "+k+" in the home")
			expect(t, string(c.role), mayPublish(p, "$KV."+b+"_overlay."+key), false, "write "+k+" in the overlay")
		}
		expect(t, string(c.role), mayPublish(p, "$JS.API.DIRECT.GET.KV_relay_quotas_overlay.$KV.relay_quotas_overlay.limits"), true, "read the quota overlay")
	}
	if mayPublish(For(Edge, "n1", Options{}), "$KV.relay_quotas_overlay.demand.edge.n1") {
		t.Error("in the home region an edge has overlay grants")
	}
	s := For(Setup, "", o)
	for _, subj := range []string{"$JS.API.STREAM.CREATE.KV_relay_breakers_overlay", "$JS.API.STREAM.DELETE.KV_relay_breakers", "$JS.a.API.STREAM.INFO.KV_relay_breakers"} {
		expect(t, "setup", mayPublish(s, subj), true, subj)
	}
}

// Generate writes a seed per node, readable by its owner only, and the
// account; the output depends only on the seeds, and a second run keeps
// every existing identity.
func TestGenerate(t *testing.T) {
	nodes := Nodes{Edge: {"e1", "e2"}, Worker: {"w1"}, Coordinator: {"c1"}}
	random := func() *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{7, 1, 9, 3}, 1024)) }
	dir1, dir2 := t.TempDir(), t.TempDir()
	users, err := Generate(dir1, nodes, Options{}, random())
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 5 {
		t.Fatalf("%d users, want 4 nodes and setup", len(users))
	}
	if _, err := Generate(dir2, nodes, Options{}, random()); err != nil {
		t.Fatal(err)
	}
	read := func(dir, name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := read(dir1, AccountsFile)
	if !bytes.Equal(first, read(dir2, AccountsFile)) {
		t.Error("the same seeds gave different accounts")
	}
	for _, f := range []string{SeedFile(Edge, "e1"), SeedFile(Edge, "e2"), SeedFile(Worker, "w1"), SeedFile(Coordinator, "c1"), SeedFile(Setup, "")} {
		st, err := os.Stat(filepath.Join(dir1, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	for _, u := range users {
		if !strings.HasPrefix(u.NKey, "U") || !bytes.Contains(first, []byte("nkey: "+u.NKey)) {
			t.Errorf("%s %s: nkey %q not in the account", u.Role, u.Node, u.NKey)
		}
	}
	for _, want := range []string{`"$KV.relay_quotas.demand.edge.e1"`, `"_INBOX.edge.e2.>"`, `"$KV.relay_quotas.demand.worker.w1"`, `"_INBOX.setup.>"`} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("the account grants no %s", want)
		}
	}
	// Again with one more edge and other randomness: nothing else changes.
	more := Nodes{Edge: {"e1", "e2", "e3"}, Worker: {"w1"}, Coordinator: {"c1"}}
	again, err := Generate(dir1, more, Options{}, bytes.NewReader(bytes.Repeat([]byte{5}, 1024)))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		found := false
		for _, v := range again {
			found = found || v == u
		}
		if !found {
			t.Errorf("%s %s lost its identity", u.Role, u.Node)
		}
	}
	for _, bad := range []Nodes{{Edge: {"e.1"}}, {Edge: {""}}, {Worker: {"w1", "w1"}}} {
		if _, err := Generate(t.TempDir(), bad, Options{}, random()); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// Each kind of stream has its writer: an edge appends frames to Durable
// Streams only, a worker to generations only, the coordinator and setup
// to neither; edges and workers read every partition, and setup creates
// every partition's chunk stream.
func TestPermissionsChunkWritesByKind(t *testing.T) {
	for _, c := range []struct {
		role                Role
		generation, durable bool
	}{{Edge, false, true}, {Worker, true, false}, {Coordinator, false, false}, {Setup, false, false}} {
		r := string(c.role)
		p := For(c.role, "n1", Options{HomeDomain: "a"})
		for k := range wire.AllPartitions {
			id := wire.NewStreamIDIn(k)
			want := c.generation
			if wire.IsDurablePartition(k) {
				want = c.durable
			}
			expect(t, r, mayPublish(p, wire.ChunkSubject(id)), want, "append to partition "+strconv.Itoa(k))
			if c.role == Edge || c.role == Worker {
				get := "$JS.API.DIRECT.GET." + wire.ChunkStreamOf(id) + "." + wire.ChunkSubject(id)
				expect(t, r, mayPublish(p, get), true, "read partition "+strconv.Itoa(k))
			}
			if c.role == Setup {
				expect(t, r, mayPublish(p, "$JS.API.STREAM.CREATE."+wire.ChunkStreamOf(id)), true, "create partition "+strconv.Itoa(k))
			}
		}
	}
}
