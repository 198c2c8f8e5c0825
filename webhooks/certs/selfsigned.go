// Package certs is the self-signed certificate mode of the webhook server, for clusters
// without cert-manager and for `make run`: a CA and a serving certificate kept in a Secret
// (so every replica serves the same one), written to the webhook server's certificate
// directory, renewed before they expire, and the CA injected as the caBundle of the
// Validating and MutatingWebhookConfigurations and of the CRDs' conversion webhook.
//
// Those caBundle fields are the only thing it writes outside its Secret, as its own field
// manager, so ArgoCD syncing those objects by server-side apply (with no caBundle in Git)
// neither diffs nor removes them (docs/architecture.md, "Field ownership"). With cert-manager, this package is not used: cert-manager
// issues the certificate and its CA injector fills the same fields.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secret.
const (
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
	CertKey    = "tls.crt"
	PrivKeyKey = "tls.key"
)

// SelfSigned manages the webhook server's certificate.
type SelfSigned struct {
	Client client.Client
	Log    logr.Logger
	// Secret holds the CA and the serving certificate.
	Secret client.ObjectKey
	// CertDir is the webhook server's certificate directory (tls.crt, tls.key).
	CertDir string
	// DNSNames and IPs are the serving certificate's subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// WebhookConfigurations (validating), MutatingWebhookConfigurations and CRDs get the CA as
	// their caBundle; a MutatingWebhookConfiguration that does not exist is skipped.
	WebhookConfigurations         []string
	MutatingWebhookConfigurations []string
	CRDs                          []string
	// Validity of the serving certificate, and how long before expiry it is renewed.
	Validity    time.Duration
	RenewBefore time.Duration
	// Interval between checks when running as a manager runnable.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *SelfSigned) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Start keeps the certificate fresh and injected until ctx ends (a manager runnable; every
// replica runs it, the Secret keeps them in agreement).
func (s *SelfSigned) Start(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Ensure(ctx); err != nil {
				s.Log.Error(err, "refreshing the webhook certificate")
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks and needs the files.
func (s *SelfSigned) NeedLeaderElection() bool { return false }

// Ensure makes sure the Secret holds a valid CA and serving certificate for the configured
// names, writes them to CertDir, and injects the CA.
func (s *SelfSigned) Ensure(ctx context.Context) error {
	var secret *corev1.Secret
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		secret, err = s.reconcileSecret(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("webhook certificate secret %s: %w", s.Secret, err)
	}
	if err := s.writeFiles(secret); err != nil {
		return fmt.Errorf("writing webhook certificate to %s: %w", s.CertDir, err)
	}
	return s.inject(ctx, secret.Data[CACertKey])
}

func (s *SelfSigned) reconcileSecret(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := s.Client.Get(ctx, s.Secret, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Secret.Name, Namespace: s.Secret.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "karpenter"}}, Type: corev1.SecretTypeTLS}
		if err := s.fill(secret); err != nil {
			return nil, err
		}
		if err := s.Client.Create(ctx, secret); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, apierrors.NewConflict(corev1.Resource("secrets"), s.Secret.Name, err) // another replica won; read theirs
			}
			return nil, err
		}
		s.Log.Info("created webhook certificate", "Secret", s.Secret)
		return secret, nil
	}
	if err != nil {
		return nil, err
	}
	if reason := s.staleReason(secret); reason != "" {
		if err := s.fill(secret); err != nil {
			return nil, err
		}
		if err := s.Client.Update(ctx, secret); err != nil {
			return nil, err
		}
		s.Log.Info("renewed webhook certificate", "Secret", s.Secret, "reason", reason)
	}
	return secret, nil
}

// staleReason says why the Secret's certificate must be replaced, or "" if it is good.
func (s *SelfSigned) staleReason(secret *corev1.Secret) string {
	ca, _, err := parsePair(secret.Data[CACertKey], secret.Data[CAKeyKey])
	if err != nil {
		return "no valid CA: " + err.Error()
	}
	leaf, _, err := parsePair(secret.Data[CertKey], secret.Data[PrivKeyKey])
	if err != nil {
		return "no valid serving certificate: " + err.Error()
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return "serving certificate not signed by the CA"
	}
	if s.now().Add(s.RenewBefore).After(leaf.NotAfter) || s.now().Add(s.RenewBefore).After(ca.NotAfter) {
		return "expires at " + leaf.NotAfter.Format(time.RFC3339)
	}
	for _, name := range s.DNSNames {
		if leaf.VerifyHostname(name) != nil {
			return "does not cover " + name
		}
	}
	for _, ip := range s.IPs {
		if leaf.VerifyHostname(ip.String()) != nil {
			return "does not cover " + ip.String()
		}
	}
	return ""
}

// fill issues a new CA (unless the current one is valid for long enough) and serving certificate.
func (s *SelfSigned) fill(secret *corev1.Secret) error {
	ca, caKey, err := parsePair(secret.Data[CACertKey], secret.Data[CAKeyKey])
	if err != nil || s.now().Add(s.RenewBefore+s.Validity).After(ca.NotAfter) {
		ca, caKey, err = newCA(s.now(), 10*s.Validity)
		if err != nil {
			return err
		}
	}
	certPEM, keyPEM, err := issue(ca, caKey, s.now(), s.Validity, s.DNSNames, s.IPs)
	if err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return err
	}
	secret.Data = map[string][]byte{
		CACertKey:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		CAKeyKey:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: caKeyDER}),
		CertKey:    certPEM,
		PrivKeyKey: keyPEM,
	}
	return nil
}

func (s *SelfSigned) writeFiles(secret *corev1.Secret) error {
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{CertKey, PrivKeyKey} {
		path := filepath.Join(s.CertDir, name)
		if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, secret.Data[name]) {
			continue
		}
		// Write then rename, so the webhook server's watcher never reads half a file.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, secret.Data[name], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

// inject sets caBundle on the webhook configurations and CRD conversion webhooks that lack it.
func (s *SelfSigned) inject(ctx context.Context, caPEM []byte) error {
	var errs []error
	for _, name := range s.WebhookConfigurations {
		if err := s.injectHooks(ctx, caPEM, &admissionregistrationv1.ValidatingWebhookConfiguration{}, name, func(o client.Object) []*admissionregistrationv1.WebhookClientConfig {
			cfg := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		}); err != nil {
			errs = append(errs, fmt.Errorf("injecting CA into ValidatingWebhookConfiguration %s: %w", name, err))
		}
	}
	for _, name := range s.MutatingWebhookConfigurations {
		err := s.injectHooks(ctx, caPEM, &admissionregistrationv1.MutatingWebhookConfiguration{}, name, func(o client.Object) []*admissionregistrationv1.WebhookClientConfig {
			cfg := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		})
		// The CapacityBudget gate can be left out of an installation.
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("injecting CA into MutatingWebhookConfiguration %s: %w", name, err))
		}
	}
	for _, name := range s.CRDs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			c := crd.Spec.Conversion
			if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil ||
				bytes.Equal(c.Webhook.ClientConfig.CABundle, caPEM) {
				return nil
			}
			patch := client.MergeFrom(crd.DeepCopy())
			c.Webhook.ClientConfig.CABundle = caPEM
			return s.Client.Patch(ctx, crd, patch)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("injecting CA into CRD %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("missing PEM data")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("not an ECDSA key")
	}
	return cert, key, nil
}

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) }

func newCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "karpenter-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time, validity time.Duration, dnsNames []string, ips []net.IP) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	cn := "karpenter-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: dnsNames, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// injectHooks sets caBundle on every webhook of one webhook configuration.
func (s *SelfSigned) injectHooks(ctx context.Context, caPEM []byte, obj client.Object, name string, configs func(client.Object) []*admissionregistrationv1.WebhookClientConfig) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		changed := false
		for _, cc := range configs(obj) {
			if !bytes.Equal(cc.CABundle, caPEM) {
				cc.CABundle = caPEM
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return s.Client.Update(ctx, obj)
	})
}
