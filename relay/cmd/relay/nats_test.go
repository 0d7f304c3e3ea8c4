package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configs/nats/accounts.conf is what `relay nats users --passwords`
// writes: the shipped users and the generator cannot drift apart.
func TestNATSUsersPasswordsIsTheShippedAccounts(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := run([]string{"nats", "users", "--passwords", "--out", dir}, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "..", "configs", "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, shipped) {
		t.Fatal("configs/nats/accounts.conf differs from `relay nats users --passwords`: regenerate it with\n  go run ./relay/cmd/relay nats users --passwords --out configs/nats")
	}
}

// `relay nats users` writes a seed per node (mode 0600) and the account
// naming each; bad arguments are refused with a message.
func TestNATSUsersPerNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ids")
	var out, errOut bytes.Buffer
	if err := run([]string{"nats", "users", "--edges", "edge-1,edge-2", "--workers", "w-1", "--coordinators", "c-1", "--out", dir}, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	for _, f := range []string{"edge.edge-1.nk", "edge.edge-2.nk", "worker.w-1.nk", "coordinator.c-1.nk", "setup.nk"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f, st.Mode().Perm())
		}
	}
	conf, err := os.ReadFile(filepath.Join(dir, "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `"$KV.relay_quotas.demand.edge.edge-2"`) {
		t.Error("edge-2's demand key is not granted")
	}
	for _, args := range [][]string{
		{"nats", "users", "--edges", "e1"},
		{"nats", "users", "--passwords", "--edges", "e1", "--out", dir},
		{"nats", "users", "--edges", "bad.name", "--out", t.TempDir()},
		{"nats"},
	} {
		if err := run(args, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
