package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// namespace creates a namespace of its own with labels, deleted after the test.
func namespace(t *testing.T, ctx context.Context, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test.Name(prefix), Labels: labels}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), ns) })
	return ns.Name
}

func budget(ns, hourly string, spot *policyv1.SpotShare) *policyv1.CapacityBudget {
	m := policyv1.Money(hourly)
	return &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &m}, Spot: spot, Enforcement: policyv1.EnforcementDeny}}
}

// patchBudget changes the namespace's budget "default" with a merge patch: the status
// controller writes the budget's status all along, and an update would race it on the
// resourceVersion.
func patchBudget(t *testing.T, ctx context.Context, ns string, change func(*policyv1.CapacityBudget)) {
	t.Helper()
	cb := &policyv1.CapacityBudget{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, cb); err != nil {
		t.Fatal(err)
	}
	base := cb.DeepCopy()
	change(cb)
	if err := kube.Patch(ctx, cb, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func namespacedDeployment(ns, name string, replicas int32, np, cpu, mem string) *appsv1.Deployment {
	d := deployment(name, replicas, np, cpu, nil)
	d.Namespace = ns
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	return d
}

// podsIn lists the pods of an app in a namespace.
func podsIn(ctx context.Context, ns, app string) []corev1.Pod {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		return nil
	}
	return pods.Items
}

// spotShare is the Spot share of the vCPU the namespace's running pods request, in percent.
func spotShare(t *testing.T, ctx context.Context, pods []corev1.Pod) float64 {
	t.Helper()
	var spot, all float64
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		cpu := p.Spec.Containers[0].Resources.Requests.Cpu().AsApproximateFloat64()
		all += cpu
		if nodeOf(t, ctx, p).Labels[karpv1.CapacityTypeLabelKey] == karpv1.CapacityTypeSpot {
			spot += cpu
		}
	}
	if all == 0 {
		return 0
	}
	return 100 * spot / all
}

func money(t *testing.T, m policyv1.Money) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(string(m), 64)
	if err != nil {
		t.Fatalf("%q is not an amount: %v", m, err)
	}
	return f
}

// eventFor waits for an Event from karpenter on the pod whose note contains all of parts.
func eventFor(ctx context.Context, ns, pod string, parts ...string) (string, error) {
	var found string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := kube.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Regarding.Name != pod || e.ReportingController != "karpenter" {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(e.Note, p)
			}
			if all {
				found = e.Reason + ": " + e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

// Two namespaces with different budgets and Spot shares scale up together: each ends within
// its Spot share, neither exceeds its hourly limit, the pods a budget holds back carry an
// Event with the numbers, the budgets' status shows them, and raising the limit lets the
// pending pods schedule.
func TestBudgetsAndSpotSharesPerNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A NodePool per team, as platform teams run them: kube-scheduler binds a pod to any node
	// with room, so a team's pods would otherwise also fill the other team's spare room on a
	// capacity type its budget did not choose.
	spotOrOnDemand := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}},
			{Key: karpv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		}
	}
	npA, npB := isolated(t, ctx, nil, spotOrOnDemand), isolated(t, ctx, nil, spotOrOnDemand)
	a := namespace(t, ctx, "team-a", map[string]string{"tier": "prod"})
	b := namespace(t, ctx, "team-b", map[string]string{"tier": "prod"})
	// team-a: plenty of money, 50-80% Spot. team-b: all Spot, and too little money for all
	// of its pods.
	create(t, ctx,
		budget(a, "10.00", &policyv1.SpotShare{MinPercent: ptr.To[int32](50), MaxPercent: ptr.To[int32](80)}),
		budget(b, "0.04", &policyv1.SpotShare{MinPercent: ptr.To[int32](100)}))
	create(t, ctx, namespacedDeployment(a, "web", 12, npA.Name, "500m", "1Gi"), namespacedDeployment(b, "batch", 12, npB.Name, "500m", "1Gi"))

	// team-a runs in full; team-b runs what its budget allows, the rest stays pending.
	var aPods, bPods []corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		aPods, bPods = podsIn(ctx, a, "web"), podsIn(ctx, b, "batch")
		running := func(ps []corev1.Pod) int {
			n := 0
			for _, p := range ps {
				if p.Status.Phase == corev1.PodRunning {
					n++
				}
			}
			return n
		}
		return running(aPods) == 12 && running(bPods) > 0, nil
	}); err != nil {
		t.Fatalf("team-a never ran in full, or team-b not at all: %v\n%s", err, local.LogTail("karpenter", 30))
	}
	if share := spotShare(t, ctx, aPods); share < 50 || share > 80 {
		t.Errorf("team-a's Spot share is %.1f%%, outside [50, 80]", share)
	}
	var blocked *corev1.Pod
	bPods = podsIn(ctx, b, "batch")
	for i := range bPods {
		if bPods[i].Spec.NodeName == "" {
			blocked = &bPods[i]
			break
		}
	}
	if blocked == nil {
		t.Fatalf("team-b's $0.04/hour cannot run 12 pods of 0.5 vCPU; all run")
	}
	if share := spotShare(t, ctx, podsIn(ctx, b, "batch")); share != 100 {
		t.Errorf("team-b runs on Spot only, got %.1f%%", share)
	}
	// "hourly cost 0.03 + 0.01 would exceed 0.04", or once the namespace is at its limit
	// "hourly cost 0.04 has reached the limit 0.04".
	ev, err := eventFor(ctx, b, blocked.Name, fmt.Sprintf("CapacityBudget %s/default: hourly cost ", b), " 0.04 (hourlyCost 0.04)")
	if err != nil {
		t.Fatalf("the blocked pod %s carries no Event with the budget's numbers: %v", blocked.Name, err)
	}
	t.Logf("blocked pod %s: %s", blocked.Name, ev)

	// The budgets' status shows the run-rate, the limit and what remains; neither exceeds
	// its limit.
	for _, tc := range []struct {
		ns    string
		limit float64
	}{{a, 10}, {b, 0.04}} {
		cb := &policyv1.CapacityBudget{}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := kube.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: "default"}, cb); err != nil {
				return false, nil
			}
			hourly, _ := strconv.ParseFloat(string(cb.Status.HourlyCost), 64)
			return cb.Status.HourlyLimit != "" && hourly > 0 &&
				meta.IsStatusConditionTrue(cb.Status.Conditions, policyv1.ConditionTypeReady) && cb.Status.ObservedGeneration == cb.Generation, nil
		}); err != nil {
			t.Fatalf("%s: budget status never filled in: %+v", tc.ns, cb.Status)
		}
		committed := money(t, cb.Status.HourlyCost) + money(t, cb.Status.InFlightHourlyCost)
		if committed > tc.limit+0.01 || money(t, cb.Status.HourlyLimit) != tc.limit {
			t.Errorf("%s: run-rate %.2f over the limit %s", tc.ns, committed, cb.Status.HourlyLimit)
		}
		if meta.IsStatusConditionTrue(cb.Status.Conditions, policyv1.ConditionTypeBudgetExceeded) {
			t.Errorf("%s: BudgetExceeded is True: %+v", tc.ns, cb.Status.Conditions)
		}
		t.Logf("%s: hourly %s (in flight %s) of %s, remaining %s, Spot %s%%, blocked %d", tc.ns, cb.Status.HourlyCost, cb.Status.InFlightHourlyCost,
			cb.Status.HourlyLimit, cb.Status.RemainingHourlyCost, cb.Status.SpotPercent, cb.Status.BlockedPods)
	}

	// Raising team-b's limit lets its pending pods schedule.
	patchBudget(t, ctx, b, func(cb *policyv1.CapacityBudget) { cb.Spec.Limits.HourlyCost = ptr.To(policyv1.Money("10.00")) })
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := 0
		for _, p := range podsIn(ctx, b, "batch") {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == 12, nil
	}); err != nil {
		t.Fatalf("raising the limit did not let team-b's pods run: %v", err)
	}
}

// A CapacityPolicy with a Rego syntax error is refused at admission with its line and column;
// one that denies p* and g* GPU families to namespaces labelled tier=dev takes effect there
// and nowhere else.
func TestCapacityPolicyAdmissionAndEffect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	broken := &policyv1.CapacityPolicy{ObjectMeta: metav1.ObjectMeta{Name: test.Name("broken")},
		Spec: policyv1.CapacityPolicySpec{Modules: []policyv1.PolicyModule{{Name: "broken.rego",
			Rego: "package karpenter.provisioning\n\ndeny contains msg if {\n\tmsg := \n}\n"}}}}
	err := kube.Create(ctx, broken)
	if err == nil {
		_ = kube.Delete(ctx, broken)
		t.Fatal("a CapacityPolicy that does not parse was admitted")
	}
	if !regexp.MustCompile(`broken\.rego:5:1`).MatchString(err.Error()) {
		t.Errorf("the refusal must name module, line and column (broken.rego:5:1): %v", err)
	}

	policy := test.NoGPUInDev(func(p *policyv1.CapacityPolicy) { p.Name, p.Generation = test.Name("no-gpu-in-dev"), 0 })
	create(t, ctx, policy)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(policy.Status.Conditions, policyv1.ConditionTypeReady) && policy.Status.ObservedGeneration == policy.Generation, nil
	}); err != nil {
		t.Fatalf("the policy never became Ready: %+v", policy.Status)
	}
	if len(policy.Status.DecisionPoints) != 1 || policy.Status.DecisionPoints[0] != policyv1.DecisionPointProvisioning {
		t.Errorf("decision points %v", policy.Status.DecisionPoints)
	}

	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			{Key: karpv1.LabelInstanceGPUName, Operator: corev1.NodeSelectorOpExists},
		}
	})
	dev := namespace(t, ctx, "ml-dev", map[string]string{"tier": "dev"})
	prod := namespace(t, ctx, "ml-prod", map[string]string{"tier": "prod"})
	gpuJob := func(ns string) *appsv1.Deployment {
		d := namespacedDeployment(ns, "train", 1, np.Name, "1", "4Gi")
		d.Spec.Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		return d
	}
	// The prod pod first, so that its GPU node is full when the dev pod comes: kube-scheduler
	// binds a pod to any node with room, and the policy governs what Karpenter launches.
	create(t, ctx, gpuJob(prod))
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ps := podsIn(ctx, prod, "train")
		return len(ps) == 1 && ps[0].Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the tier=prod GPU pod must run: %v\n%s", err, local.LogTail("karpenter", 20))
	}
	if n := nodeOf(t, ctx, podsIn(ctx, prod, "train")[0]); !strings.HasPrefix(n.Labels[karpv1.LabelInstanceFamily], "g") && !strings.HasPrefix(n.Labels[karpv1.LabelInstanceFamily], "p") {
		t.Errorf("the prod GPU pod runs on %s", n.Labels[karpv1.LabelInstanceType])
	}
	var before karpv1.NodeClaimList
	if err := kube.List(ctx, &before, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, gpuJob(dev))
	var devPods []corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		devPods = podsIn(ctx, dev, "train")
		return len(devPods) == 1, nil
	}); err != nil {
		t.Fatal("the dev Deployment made no pod")
	}
	ev, err := eventFor(ctx, dev, devPods[0].Name, "CapacityPolicy "+policy.Name)
	if err != nil {
		t.Fatalf("the dev pod carries no Event naming the policy: %v", err)
	}
	t.Logf("dev pod: %s", ev)
	var after karpv1.NodeClaimList
	if err := kube.List(ctx, &after, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	if p := podsIn(ctx, dev, "train"); len(after.Items) != len(before.Items) || p[0].Spec.NodeName != "" {
		t.Fatalf("no GPU capacity for the dev namespace: NodeClaims %d -> %d, dev pod on %q", len(before.Items), len(after.Items), p[0].Spec.NodeName)
	}
}
