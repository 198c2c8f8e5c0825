// Package nodeclaim_test drives the NodeClaim lifecycle and garbage collection against a real
// API server, with a fake clock for the timeouts.
package nodeclaim_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }

func reconcileOnce(t *testing.T, c *lifecycle.Controller, name string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc := &karpv1.NodeClaim{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	out := &karpv1.NodeClaim{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: name}, out); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return out
}

// launchable creates a KWOKNodeClass and a NodeClaim of it (changed by opts) on the API server.
func launchable(t *testing.T, opts ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	class := test.KWOKNodeClass()
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	nc := test.NodeClaim(append([]func(*karpv1.NodeClaim){func(nc *karpv1.NodeClaim) { nc.Spec.NodeClassRef.Name = class.Name }}, opts...)...)
	if err := testEnv.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestLaunchRegisterInitializeAndLiveness(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := events.NewFakeRecorder(100)
	cloud := kwok.New(testEnv.Client, clk, 1)
	c := lifecycle.NewController(env.Indexed(testEnv.Client), cloud, recorder, clk)
	class := test.KWOKNodeClass()
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	nc := test.NodeClaim(func(nc *karpv1.NodeClaim) {
		nc.Spec.NodeClassRef.Name = class.Name
		nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "general"}
		nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
	})
	if err := testEnv.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	got := reconcileOnce(t, c, nc.Name)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeLaunched) || got.Status.ProviderID == "" {
		t.Fatalf("want Launched with a provider ID: %+v", got.Status)
	}
	if len(got.Finalizers) == 0 || got.Labels[karpv1.LabelInstanceType] == "" {
		t.Errorf("want the termination finalizer and the instance type label: %v %v", got.Finalizers, got.Labels)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeRegistered) {
		t.Fatalf("the kwok node exists at once, so the NodeClaim registers: %+v", got.Status.Conditions)
	}
	node := &corev1.Node{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: got.Status.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == karpv1.UnregisteredTaintKey {
			t.Error("registration removes the unregistered taint")
		}
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeInitialized); cond == nil || cond.Status == metav1.ConditionTrue {
		t.Fatalf("no kubelet made the node Ready here: Initialized must wait, got %+v", cond)
	}
	// Ready node, startup taint still there: not initialized.
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := testEnv.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if got = reconcileOnce(t, c, nc.Name); meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeInitialized) {
		t.Fatal("the startup taint is still on the node")
	}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: node.Name}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = nil
	if err := testEnv.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
	got = reconcileOnce(t, c, nc.Name)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeInitialized) || !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeReady) {
		t.Fatalf("want Initialized and Ready: %+v", got.Status.Conditions)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}

	// A NodeClaim whose node class does not exist is deleted at once, as upstream's.
	orphan := test.NodeClaim(func(nc *karpv1.NodeClaim) { nc.Spec.NodeClassRef.Name = "missing" })
	if err := testEnv.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, orphan.Name); got != nil && got.DeletionTimestamp == nil {
		t.Fatal("a NodeClaim whose node class does not exist is deleted")
	}
	// One that fails validation never launches, and is deleted after 5 minutes.
	c.WithValidation(func(*karpv1.NodeClaim) field.ErrorList {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "taints"), "x", "invalid for the test")}
	})
	stuck := test.NodeClaim()
	if err := testEnv.Client.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, stuck.Name); got == nil || meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeLaunched) {
		t.Fatal("it cannot launch, and is kept for now")
	}
	clk.Step(lifecycle.LaunchTTL + time.Minute)
	if got := reconcileOnce(t, c, stuck.Name); got != nil && got.DeletionTimestamp == nil {
		t.Fatal("after 5 minutes without launch the NodeClaim is deleted")
	}
}

// kwokNode creates a Node of the kwok provider, as its instance would register, with no
// NodeClaim behind it.
func kwokNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kwok.NodeAnnotation: "fake"}},
		Spec: corev1.NodeSpec{ProviderID: kwok.ProviderIDPrefix + name}}
	if err := testEnv.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGarbageCollection(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	cloud := kwok.New(testEnv.Client, clk, 1)
	orphan := kwokNode(t, "orphan")
	gone := test.NodeClaim()
	if err := testEnv.Client.Create(ctx, gone); err != nil {
		t.Fatal(err)
	}
	gone.Status.ProviderID = kwok.ProviderIDPrefix + "never-existed"
	gone.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.Now()}}
	if err := testEnv.Client.Status().Update(ctx, gone); err != nil {
		t.Fatal(err)
	}
	gc := garbagecollection.NewController(testEnv.Client, modelOf(t, clk, gone), testEnv.Client, cloud, clk)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("a kwok node no NodeClaim accounts for is terminated, got %v", err)
	}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(gone), &karpv1.NodeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("a NodeClaim whose instance is gone is deleted, got %v", err)
	}
}

// countingCloud is the kwok provider, counting launches.
type countingCloud struct {
	*kwok.Provider
	creates int
}

func (c *countingCloud) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	c.creates++
	return c.Provider.Create(ctx, nc)
}

// A reconcile that reads the NodeClaim from a cache that has not seen its launch (the status
// patch) yet does not launch it again: in a 500-node scale-out every NodeClaim launched about
// four times, each waiting out the node class's launch delay again.
func TestLaunchOnceWithAStaleRead(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := &countingCloud{Provider: kwok.New(testEnv.Client, clk, 1)}
	c := lifecycle.NewController(env.Indexed(testEnv.Client), cloud, events.NewFakeRecorder(100), clk)
	nc := launchable(t)
	stale := nc.DeepCopy()
	if got := reconcileOnce(t, c, nc.Name); got.Status.ProviderID == "" {
		t.Fatalf("want it launched: %+v", got.Status)
	}
	if _, err := c.Reconcile(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if cloud.creates != 1 {
		t.Fatalf("launched %d times, want once", cloud.creates)
	}
	got := &karpv1.NodeClaim{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeLaunched) || got.Status.ProviderID == "" {
		t.Fatalf("the stale reconcile keeps the launch: %+v", got.Status)
	}
}

// racingNodeReader returns Nodes as they were, then lets another writer change them (once),
// as a cache a moment behind the API server.
type racingNodeReader struct {
	client.Client
	once sync.Once
	race func()
}

func (r *racingNodeReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := r.Client.List(ctx, list, opts...)
	if _, ok := list.(*corev1.NodeList); ok && err == nil {
		r.once.Do(r.race)
	}
	return err
}

// Registration written from a stale copy of the Node must not undo what another writer did
// meanwhile: in a scale-out, registering from a copy older than kube-controller-manager lifting
// the not-ready taint put that taint back, and pods waited seconds more for the node.
func TestRegistrationKeepsOtherWritersTaints(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	nc := launchable(t)
	agent := corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}
	reader := &racingNodeReader{Client: env.Indexed(testEnv.Client)}
	reader.race = func() {
		node := &corev1.Node{}
		if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: nc.Name}, node); err != nil {
			t.Error(err)
			return
		}
		node.Spec.Taints = append(node.Spec.Taints, agent)
		if err := testEnv.Client.Update(ctx, node); err != nil {
			t.Error(err)
		}
	}
	c := lifecycle.NewController(reader, kwok.New(testEnv.Client, clk, 1), events.NewFakeRecorder(100), clk)
	first := reconcileOnce(t, c, nc.Name)
	got := reconcileOnce(t, c, nc.Name)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeRegistered) {
		t.Fatalf("registered on a fresh read: first %+v, then %+v", first.Status.Conditions, got.Status.Conditions)
	}
	node := &corev1.Node{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: got.Status.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, taint := range node.Spec.Taints {
		if taint.Key == karpv1.UnregisteredTaintKey {
			t.Error("registration removes the unregistered taint")
		}
		kept = kept || taint.MatchTaint(&agent)
	}
	if !kept {
		t.Errorf("the taint another writer added after our read is gone: %v", node.Spec.Taints)
	}
}

// lateNodeReader lists no Nodes until shown is set, as a cache that has not seen a new Node.
type lateNodeReader struct {
	client.Client
	shown bool
}

func (r *lateNodeReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.NodeList); ok && !r.shown {
		return nil
	}
	return r.Client.List(ctx, list, opts...)
}

// The Node registers as soon as it is seen, even while the cache still shows the NodeClaim
// from before its launch: pods wait for the node, and waiting for the NodeClaim's launch to
// come back through the cache cost seconds per node in a scale-out.
func TestNodeRegistersBeforeTheLaunchReachesTheCache(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	nc := launchable(t, func(nc *karpv1.NodeClaim) { nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "general"} })
	beforeLaunch := nc.DeepCopy()
	reader := &lateNodeReader{Client: env.Indexed(testEnv.Client)}
	c := lifecycle.NewController(reader, kwok.New(testEnv.Client, clk, 1), events.NewFakeRecorder(100), clk)
	if got := reconcileOnce(t, c, nc.Name); got.Status.ProviderID == "" || meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeRegistered) {
		t.Fatalf("want launched, not registered (the cache has no Node yet): %+v", got.Status)
	}
	reader.shown = true
	if _, err := c.Reconcile(ctx, beforeLaunch); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: nc.Name}, node); err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == karpv1.UnregisteredTaintKey {
			t.Errorf("the node is still unregistered: %v", node.Spec.Taints)
		}
	}
	if node.Labels[karpv1.NodePoolLabelKey] != "general" || node.Labels[karpv1.NodeRegisteredLabelKey] != "true" || node.Labels[karpv1.LabelInstanceType] == "" {
		t.Errorf("want the NodeClaim's labels, the launch's instance type and the registered label: %v", node.Labels)
	}
}

// modelOf is a cluster model that holds these objects, as its informers would give them.
func modelOf(t *testing.T, clk *clocktesting.FakeClock, objs ...client.Object) *state.Cluster {
	t.Helper()
	c := state.NewCluster(testEnv.Client, clk)
	for _, o := range objs {
		c.Update(o)
	}
	return c
}

// The garbage collector terminates an instance only if the API server, not only the cache,
// has no NodeClaim for it.
func TestGarbageCollectionChecksTheAPIServer(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	cloud := kwok.New(testEnv.Client, clk, 1)
	// The cluster model has not seen the NodeClaim yet.
	gc := garbagecollection.NewController(testEnv.Client, modelOf(t, clk), testEnv.Client, cloud, clk)
	owned := kwokNode(t, "owned")
	nc := test.NodeClaim()
	if err := testEnv.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = owned.Spec.ProviderID
	if err := testEnv.Client.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.Node{}); err != nil {
		t.Fatalf("the node has a NodeClaim on the API server and must stay: %v", err)
	}
}
