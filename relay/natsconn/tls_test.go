package natsconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/relaytest"
)

// A role reaches a server that requires TLS and client certificates (the
// tls block of configs/nats/nats-server.conf, verify on) with nats.ca_file,
// nats.cert_file and nats.key_file, and JetStream works over it; the same
// server refuses a plaintext client and a TLS client without a
// certificate its CA signed.
func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	other := newCA(t)
	other.issue(t, dir, "stranger", x509.ExtKeyUsageClientAuth)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.cert.Raw)

	conf := filepath.Join(dir, "nats-server.conf")
	must(t, os.WriteFile(conf, fmt.Appendf(nil, `
listen: 127.0.0.1:-1
jetstream { store_dir: %q }
tls {
  cert_file: %q
  key_file:  %q
  ca_file:   %q
  verify:    true
}
`, filepath.Join(dir, "js"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem")), 0o600))
	srv, err := natsserver.StartFile(conf, natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	url := fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)

	nc, js, err := natsconn.Connect(natsconn.Config{
		URL:      url,
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}.ForRole("edge"), "test", relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, nc.IsConnected)
	state, err := nc.TLSConnectionState()
	if err != nil || !state.HandshakeComplete {
		t.Fatalf("connected without TLS: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "tls"})
	if err != nil {
		t.Fatalf("JetStream over TLS: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("KV put over TLS: %v", err)
	}

	if c, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)); err == nil {
		c.Close()
		t.Fatal("the server accepted a plaintext client")
	}
	if c, err := nats.Connect(url, nats.RootCAs(filepath.Join(dir, "ca.pem"))); err == nil {
		c.Close()
		t.Fatal("the server accepted a TLS client without a certificate")
	}
	if c, err := nats.Connect(url, nats.RootCAs(filepath.Join(dir, "ca.pem")),
		nats.ClientCert(filepath.Join(dir, "stranger.pem"), filepath.Join(dir, "stranger-key.pem"))); err == nil {
		c.Close()
		t.Fatal("the server accepted a client certificate of another CA")
	}
}

// testCA signs the certificates of one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "relay test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	return &testCA{cert: cert, key: key}
}

// issue writes <name>.pem and <name>-key.pem in dir: a certificate for
// 127.0.0.1 that ca signed, for usage.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	must(t, err)
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "PRIVATE KEY", pk)
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
