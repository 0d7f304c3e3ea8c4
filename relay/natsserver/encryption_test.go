package natsserver_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsserver"
)

// With embedded_nats.encryption_key, no file of the store holds a stored
// prompt in cleartext; without it one does (so the search below can find
// it), and a key too short to protect anything is refused.
func TestEncryptionAtRest(t *testing.T) {
	const prompt = "a tenant's prompt, to be kept from the disk 5c1e"
	for _, c := range []struct {
		key       string
		cleartext bool
	}{{"", true}, {"0123456789abcdef0123456789abcdef", false}} {
		dir := t.TempDir()
		srv, err := natsserver.Start(natsserver.Config{StoreDir: dir, EncryptionKey: c.key})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROMPTS", Subjects: []string{"prompts"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "prompts", []byte(prompt)); err != nil {
			t.Fatal(err)
		}
		cancel()
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()

		found := ""
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err == nil && bytes.Contains(b, []byte(prompt)) {
				found = path
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if (found != "") != c.cleartext {
			t.Fatalf("key %q: prompt in cleartext at %q, want cleartext %v", c.key, found, c.cleartext)
		}
	}

	err := natsserver.Config{EncryptionKey: "short"}.Validate("embedded_nats")
	if err == nil || !strings.Contains(err.Error(), "embedded_nats.encryption_key") {
		t.Fatalf("a 5-character key: %v, want an error naming embedded_nats.encryption_key", err)
	}
}
