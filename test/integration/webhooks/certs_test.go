package webhooks_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/webhooks/certs"
)

func TestSelfSignedCertificates(t *testing.T) {
	ctx := context.Background()
	kube := testEnv.Client

	// A webhook configuration and a converted CRD of their own, so the suite's are untouched.
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "certs-test"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "a.certs.test", SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"certs.test"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}}}},
		}},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.certs.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "certs.test", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
				{Name: "v2", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1"},
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")},
			}},
		},
	}
	for _, o := range []client.Object{hook, crd} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(ctx, o) })
	}

	now := time.Now()
	replica := func(dir string) *certs.SelfSigned {
		return &certs.SelfSigned{
			Client: kube, Log: testr.New(t),
			Secret:  client.ObjectKey{Namespace: "default", Name: "webhook-cert"},
			CertDir: dir, DNSNames: []string{"karpenter-webhook-service.karpenter.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
			WebhookConfigurations: []string{hook.Name}, CRDs: []string{crd.Name},
			Validity: 365 * 24 * time.Hour, RenewBefore: 30 * 24 * time.Hour, Interval: time.Hour,
			Now: func() time.Time { return now },
		}
	}
	a, b := replica(t.TempDir()), replica(t.TempDir())
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	certA, _ := os.ReadFile(filepath.Join(a.CertDir, "tls.crt"))
	certB, _ := os.ReadFile(filepath.Join(b.CertDir, "tls.crt"))
	if len(certA) == 0 || !bytes.Equal(certA, certB) {
		t.Fatal("two replicas must serve the same certificate from the Secret")
	}
	secret := &corev1.Secret{}
	if err := kube.Get(ctx, a.Secret, secret); err != nil {
		t.Fatal(err)
	}
	ca := secret.Data[certs.CACertKey]
	expectInjected(t, hook, crd, ca)
	leaf := parseCert(t, certA)
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("certificate must cover the configured IP: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "karpenter-webhook-service.karpenter.svc", CurrentTime: now}); err != nil {
		t.Errorf("certificate must chain to the injected CA: %v", err)
	}

	// Within RenewBefore of expiry the certificate is renewed; the CA, still valid, is kept.
	now = leaf.NotAfter.Add(-24 * time.Hour)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewed, _ := os.ReadFile(filepath.Join(a.CertDir, "tls.crt"))
	if bytes.Equal(renewed, certA) {
		t.Fatal("a certificate a day from expiry must be renewed")
	}
	if got := parseCert(t, renewed); !got.NotAfter.After(leaf.NotAfter) {
		t.Errorf("renewed certificate expires %s, not after %s", got.NotAfter, leaf.NotAfter)
	}
	if err := kube.Get(ctx, a.Secret, secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[certs.CACertKey], ca) {
		t.Error("the CA was replaced although it is valid for years")
	}
	expectInjected(t, hook, crd, ca)
}

func expectInjected(t *testing.T, hook *admissionregistrationv1.ValidatingWebhookConfiguration, crd *apiextensionsv1.CustomResourceDefinition, ca []byte) {
	t.Helper()
	ctx := context.Background()
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(hook), hook); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hook.Webhooks[0].ClientConfig.CABundle, ca) {
		t.Error("CA not injected into the ValidatingWebhookConfiguration")
	}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, ca) {
		t.Error("CA not injected into the CRD's conversion webhook")
	}
	if crd.Spec.Conversion.Webhook.ClientConfig.URL == nil {
		t.Error("injection must change the caBundle only")
	}
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
