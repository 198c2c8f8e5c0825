package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
)

// writeCert writes a self-signed certificate for 127.0.0.1 as tls.crt and tls.key.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// The webhook server refuses TLS 1.0 and 1.1 and accepts 1.2 and 1.3, whatever Go's default.
func TestWebhookServerRefusesOldTLS(t *testing.T) {
	// Go's own default would refuse them too; with this, only the server's setting does.
	t.Setenv("GODEBUG", "tls10server=1")
	dir := t.TempDir()
	writeCert(t, dir)
	port := freePort(t)
	srv := webhookServer(&options.Options{WebhookHost: "127.0.0.1", WebhookPort: port, WebhookCertDir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Start(ctx) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dial := func(version uint16) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr,
			&tls.Config{MinVersion: version, MaxVersion: version, InsecureSkipVerify: true}) //nolint:gosec // the test's own server
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for dial(tls.VersionTLS12) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if dial(v) == nil {
			t.Errorf("TLS %x accepted", v)
		}
	}
	if err := dial(tls.VersionTLS13); err != nil {
		t.Errorf("TLS 1.3 refused: %v", err)
	}
}
