package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	cloudfake "github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

var agentTaint = corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}

func claimAndNode(nodeTaints []corev1.Taint, nodeLabels map[string]string) (*karpv1.NodeClaim, *corev1.Node) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"},
		Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec: karpv1.NodeClaimSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{agentTaint}},
		Status: karpv1.NodeClaimStatus{ProviderID: "fake://claim"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: nodeLabels}, Spec: corev1.NodeSpec{ProviderID: "fake://claim", Taints: nodeTaints}}
	return nc, node
}

func newController(t *testing.T, objs ...client.Object) (*Controller, client.Client, *events.FakeRecorder) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).WithStatusSubresource(&karpv1.NodeClaim{})
	for _, i := range index.Indexes {
		b = b.WithIndex(i.Object, i.Field, i.Extract)
	}
	c := b.Build()
	rec := events.NewFakeRecorder(10)
	return NewController(c, cloudfake.New(), rec, clocktesting.NewFakeClock(metav1.Now().Time)), c, rec
}

// Registration gives the Node its NodeClaim's labels, annotations, taints and startup taints,
// and lifts the unregistered taint; a Node marked do-not-sync-taints keeps its own taints; a
// Node that came up without the unregistered taint is registered, with a warning.
func TestRegistrationSyncsTheNodeClaim(t *testing.T) {
	for _, tc := range []struct {
		name        string
		taints      []corev1.Taint
		labels      map[string]string
		wantTaints  []string
		wantWarning bool
	}{
		{name: "taints copied, unregistered lifted", taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint},
			wantTaints: []string{"dedicated", "example.com/agent"}},
		{name: "taints the node has are not doubled", taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint, agentTaint},
			wantTaints: []string{"example.com/agent", "dedicated"}},
		{name: "do-not-sync-taints", taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, labels: map[string]string{karpv1.DoNotSyncTaintsLabelKey: "true"},
			wantTaints: nil},
		{name: "no unregistered taint", taints: nil, wantTaints: []string{"dedicated", "example.com/agent"}, wantWarning: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, node := claimAndNode(tc.taints, tc.labels)
			ctl, c, rec := newController(t, nc, node)
			created := metrics.NodesCreated.WithLabelValues("general", node.Labels[corev1.LabelTopologyZone])
			before := testutil.ToFloat64(created)
			if _, err := ctl.registerNode(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			if _, err := ctl.registerNode(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			if n := testutil.ToFloat64(created) - before; n != 1 {
				t.Errorf("karpenter_nodes_created_total rose by %v for one node registered (twice), want 1", n)
			}
			got := &corev1.Node{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "node"}, got); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, taint := range got.Spec.Taints {
				keys = append(keys, taint.Key)
			}
			if len(keys) != len(tc.wantTaints) {
				t.Fatalf("taints %v, want %v", keys, tc.wantTaints)
			}
			for i := range keys {
				if keys[i] != tc.wantTaints[i] {
					t.Fatalf("taints %v, want %v", keys, tc.wantTaints)
				}
			}
			if got.Labels[karpv1.NodePoolLabelKey] != "general" || got.Labels[karpv1.NodeRegisteredLabelKey] != "true" || got.Annotations["example.com/owner"] != "team-a" {
				t.Errorf("labels %v, annotations %v", got.Labels, got.Annotations)
			}
			if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Kind != "NodeClaim" || refs[0].APIVersion != "karpenter.sh/v1" || refs[0].Name != nc.Name ||
				refs[0].UID != nc.UID || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
				t.Errorf("owner references %+v, want the NodeClaim's, blocking owner deletion", refs)
			}
			warned := len(rec.Events) > 0
			if warned != tc.wantWarning {
				t.Errorf("UnregisteredTaintMissing event: %v, want %v", warned, tc.wantWarning)
			}
			if warned {
				if e := <-rec.Events; e[:len("Warning UnregisteredTaintMissing")] != "Warning UnregisteredTaintMissing" {
					t.Errorf("event %q", e)
				}
			}
		})
	}
}

// Initialization waits for a known ephemeral taint to go, and for every extended resource the
// instance type promises to be registered; cpu and memory are the kubelet's, not waited for.
func TestInitializationWaits(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name       string
		taints     []corev1.Taint
		nodeAlloc  corev1.ResourceList
		wantReason string
	}{
		{name: "initialized", nodeAlloc: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, wantReason: "Initialized"},
		{name: "not-ready taint remains", taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}},
			nodeAlloc: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, wantReason: "KnownEphemeralTaintsPresent"},
		{name: "the GPU is not registered yet", nodeAlloc: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, wantReason: "ResourceNotRegistered"},
		{name: "the GPU registered as zero", nodeAlloc: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}, wantReason: "ResourceNotRegistered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, node := claimAndNode(tc.taints, map[string]string{})
			nc.Spec.StartupTaints = nil
			nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
				"nvidia.com/gpu": resource.MustParse("1")}
			node.Status.Conditions, node.Status.Allocatable = ready, tc.nodeAlloc
			ctl, _, _ := newController(t, nc, node)
			if _, err := ctl.initialize(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			var reason string
			for _, c := range nc.Status.Conditions {
				if c.Type == karpv1.ConditionTypeInitialized {
					reason = c.Reason
				}
			}
			if reason != tc.wantReason {
				t.Errorf("Initialized reason %q, want %q", reason, tc.wantReason)
			}
		})
	}
}

// There is no NodeClaim webhook: what the CRD cannot check is checked before the launch. A
// NodeClaim that fails gets ValidationSucceeded False naming the field, an event, and no
// instance; one that passes is launched.
func TestValidationBeforeLaunch(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		valid  bool
	}{
		{name: "duplicate taint", taints: []corev1.Taint{taint, taint}},
		{name: "valid", taints: []corev1.Taint{taint}, valid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}, CreationTimestamp: metav1.Now()},
				Spec: karpv1.NodeClaimSpec{Taints: tc.taints, NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}
			ctl, c, rec := newController(t, nc)
			ctl.WithValidation(validation.New().NodeClaim)
			if _, err := ctl.Reconcile(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			got := &karpv1.NodeClaim{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "claim"}, got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeValidationSucceeded)
			if cond == nil || (cond.Status == metav1.ConditionTrue) != tc.valid {
				t.Fatalf("ValidationSucceeded %+v, want valid %v", cond, tc.valid)
			}
			if launched := got.Status.ProviderID != ""; launched != tc.valid {
				t.Fatalf("launched %v, want %v", launched, tc.valid)
			}
			if !tc.valid {
				if !strings.Contains(cond.Message, "spec.taints[1]") {
					t.Errorf("the message does not name the field: %s", cond.Message)
				}
				if e := <-rec.Events; !strings.HasPrefix(e, "Warning FailedValidation") {
					t.Errorf("event %q", e)
				}
			}
		})
	}
}

// A NodeClaim whose node class is missing is deleted with a warning, as upstream's, not
// retried forever.
func TestNodeClassNotReadyDeletesTheNodeClaim(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}, CreationTimestamp: metav1.Now()},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "missing"}}}
	ctl, c, rec := newController(t, nc)
	ctl.cloud.(*cloudfake.Provider).CreateErr = cloudprovider.NewNodeClassNotReadyError(errors.New("KWOKNodeClass missing not found"))
	if _, err := ctl.Reconcile(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "claim"}, &karpv1.NodeClaim{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the NodeClaim is still there: %v", err)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Warning NodeClassNotReady") || !strings.Contains(e, "missing not found") {
		t.Errorf("event %q", e)
	}
}
