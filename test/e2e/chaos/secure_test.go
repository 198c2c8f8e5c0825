package chaos

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/karpenter-policy/karpenter/test/cluster"
)

// A manager run as the chart runs it (--metrics-secure) serves its metrics over HTTPS only,
// and only to a caller whose token the API server authenticates and who may GET /metrics:
// no token is 401, a ServiceAccount without the permission 403, one bound to a role like
// the chart's metrics-reader 200. The manager here is a third replica; it stays standby
// while the suite's leader holds the Lease, and serves its metrics all the same.
func TestSecureMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ports, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	mp := cluster.ManagerPorts{Metrics: ports[0], Probes: ports[1], Webhooks: ports[2]}
	p := cluster.ManagerProcess("karpenter-secure", managerBin, mp, t.TempDir(), true, []string{"--metrics-secure"}, []string{"KUBECONFIG=" + local.Kubeconfig})
	if err := local.StartProcess(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Kill("karpenter-secure") })
	if err := local.WaitManagerReady(ctx, mp.Probes); err != nil {
		t.Fatal(err)
	}

	url := "127.0.0.1:" + strconv.Itoa(mp.Metrics) + "/metrics"
	// The metrics server starts beside the probes, not before them: wait until it answers.
	for i := 0; i < 60; i++ {
		if code, _ := get(ctx, "https://"+url, ""); code != 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code, _ := get(ctx, "http://"+url, ""); code == http.StatusOK {
		t.Error("the metrics were served over plain HTTP")
	}
	if code, body := get(ctx, "https://"+url, ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d (%s), want 401", code, body)
	}
	cs := kubernetes.NewForConfigOrDie(local.Config)
	token := func(name string) string {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		create(t, ctx, sa)
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	if code, _ := get(ctx, "https://"+url, token("metrics-nobody")); code != http.StatusForbidden {
		t.Errorf("with a ServiceAccount that may not GET /metrics: %d, want 403", code)
	}
	reader := token("metrics-reader")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "chaos-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "metrics-reader"}}}
	create(t, ctx, role, binding)
	// RBAC is read from the API server's cache: a moment until the binding counts.
	var code int
	var body string
	for range 20 {
		if code, body = get(ctx, "https://"+url, reader); code == http.StatusOK {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
		t.Errorf("with a ServiceAccount bound to a metrics reader role: %d, want 200 with the metrics", code)
	}
}

// get GETs url (any certificate: the manager's is self-signed) with a bearer token, and
// returns the status code (0 when the request failed) and body.
func get(ctx context.Context, url, token string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the manager's certificate is self-signed
	}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
