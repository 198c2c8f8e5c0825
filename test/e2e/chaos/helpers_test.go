package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// pool creates a KWOKNodeClass and a NodePool of their own, and deletes them (and their
// NodeClaims) when the test ends.
func pool(t *testing.T, ctx context.Context, classMut func(*kwokv1alpha1.KWOKNodeClass), poolMut func(*karpv1.NodePool)) (*karpv1.NodePool, *kwokv1alpha1.KWOKNodeClass) {
	t.Helper()
	class := test.KWOKNodeClass(classMut)
	np := test.NodePool(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef.Name = class.Name
		if poolMut != nil {
			poolMut(np)
		}
	})
	for _, o := range []client.Object{class, np} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = kube.Delete(ctx, np)
		var claims karpv1.NodeClaimList
		_ = kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name})
		for i := range claims.Items {
			_ = kube.Delete(ctx, &claims.Items[i])
		}
		// The next test starts from an empty cluster: every node of this one gone.
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			var claims karpv1.NodeClaimList
			err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name})
			return err == nil && len(claims.Items) == 0, nil
		})
		_ = kube.Delete(ctx, class)
	})
	return np, class
}

func deployment(ns, name string, replicas int32, np, cpu string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: np},
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
			}}},
	}
}

// create creates objects and deletes them when the test ends.
func create(t *testing.T, ctx context.Context, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
}

// running counts the Running pods of app in ns.
func running(ctx context.Context, ns, app string) (int, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// waitRunning waits until exactly n pods of app run.
func waitRunning(t *testing.T, ctx context.Context, ns, app string, n int, timeout time.Duration) {
	t.Helper()
	var last int
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := running(ctx, ns, app)
		if err != nil {
			// The poll's last call can fail as its deadline cuts it: the count before stands.
			return false, nil
		}
		last = got
		return got == n, nil
	}); err != nil {
		t.Fatalf("%d of %d pods of %s running after %s: %v", last, n, app, timeout, err)
	}
}

// waitCapped waits until some pods of the capped namespace run, the budget's status shows
// what they cost and holds back every other one, and as many have run for 10 s: the rest
// are held, most by the
// CapacityBudget gate (a pod whose gate was lifted for room that others took, after a
// failover, waits ungated).
func waitCapped(t *testing.T, ctx context.Context, ns string, budget client.ObjectKey, timeout time.Duration) {
	t.Helper()
	var runs, held, other, lastRuns int
	var cost float64
	var since time.Time
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		var b policyv1.CapacityBudget
		if kube.List(ctx, &pods, client.InNamespace(ns)) != nil || kube.Get(ctx, budget, &b) != nil {
			return false, nil
		}
		runs, held, other = 0, 0, 0
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase == corev1.PodRunning:
				runs++
			case len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == policyv1.CapacityBudgetGate:
				held++
			default:
				other++
			}
		}
		cost = usd(b.Status.HourlyCost) + usd(b.Status.InFlightHourlyCost)
		if runs != lastRuns || since.IsZero() {
			lastRuns, since = runs, time.Now()
		}
		// Settled: every pending pod is one the budget holds back, as the provisioner last saw.
		return runs > 0 && cost > 0 && int(b.Status.BlockedPods) == held+other && time.Since(since) >= 10*time.Second, nil
	}); err != nil {
		t.Fatalf("%s: %d pods running, %d held by the gate, %d neither, $%.2f/h after %s", ns, runs, held, other, cost, timeout)
	}
	t.Logf("%s: %d pods running, %d held by the gate, %d pending ungated, $%.2f/h", ns, runs, held, other, cost)
}

// leader waits for a manager to hold the Lease, and returns its name.
func leader(t *testing.T, ctx context.Context, timeout time.Duration) string {
	t.Helper()
	var name string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		name = local.Leader(ctx)
		return name != "", nil
	}); err != nil {
		t.Fatalf("no manager held the Lease within %s", timeout)
	}
	return name
}

// killLeader SIGKILLs the leading manager, and returns how long the other took to hold the
// Lease. The killed one stays down for longer than the Lease lasts (the supervisor starts
// it again later), so that the standby, not the restarted leader, is what takes over.
func killLeader(t *testing.T, ctx context.Context) (killed string, takeover time.Duration) {
	t.Helper()
	restartDelay.Store(int64(2 * leaseDuration))
	defer restartDelay.Store(int64(time.Second))
	killed = leader(t, ctx, time.Minute)
	if err := local.Kill(killed); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	var next string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		next = local.Leader(ctx)
		return next != "" && next != killed, nil
	}); err != nil {
		t.Fatalf("after %s was killed, no other manager took the Lease within a minute (now %q)", killed, next)
	}
	return killed, time.Since(at)
}

// leaseDuration is controller-runtime's default, which the manager keeps (upstream does).
const leaseDuration = 15 * time.Second

// claims lists the NodeClaims of a NodePool.
func claims(ctx context.Context, np string) ([]karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	err := kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np})
	return list.Items, err
}

// unused lists the NodeClaims of np that run none of app's pods: capacity launched twice.
func unused(ctx context.Context, np, ns, app string) ([]string, error) {
	cs, err := claims(ctx, np)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range pods.Items {
		used[p.Spec.NodeName] = true
	}
	var out []string
	for _, nc := range cs {
		if !used[nc.Status.NodeName] {
			out = append(out, fmt.Sprintf("%s (%s, node %q)", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], nc.Status.NodeName))
		}
	}
	return out, nil
}

func metav1Duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// cappedNamespace creates a namespace whose CapacityBudget limits it to limit USD an hour
// (no Spot or family rule), deletes it when the test ends, and waits until the controller
// has labelled it for the CapacityBudget gate: its pods are gated from their creation on.
// It returns the budget's key.
func cappedNamespace(t *testing.T, ctx context.Context, name, limit string) client.ObjectKey {
	t.Helper()
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	budget := test.CapacityBudget(func(b *policyv1.CapacityBudget) {
		b.Namespace = name
		b.Spec.Limits.HourlyCost = ptr.To[policyv1.Money](policyv1.Money(limit))
		b.Spec.Spot, b.Spec.InstanceFamilies = nil, nil
	})
	create(t, ctx, budget)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nsObj := &corev1.Namespace{}
		return kube.Get(ctx, client.ObjectKey{Name: name}, nsObj) == nil &&
			nsObj.Labels[policyv1.NamespaceGateLabel] == policyv1.NamespaceGateLabelValue, nil
	}); err != nil {
		t.Fatalf("namespace %s never got the CapacityBudget gate's label", name)
	}
	return client.ObjectKeyFromObject(budget)
}
