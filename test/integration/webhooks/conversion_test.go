package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

func specJSON(t *testing.T, spec any) string {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The GitOps case: a v1beta1 manifest applied to the cluster, read by v1 controllers, and
// read back by the v1beta1 client that owns it, unchanged.
func TestNodePoolWrittenAtV1beta1(t *testing.T) {
	ctx := context.Background()
	src := test.NodePoolV1beta1(func(np *karpv1beta1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &karpv1beta1.NodeClassReference{Name: "default"} // kind and apiVersion omitted
		np.Spec.Template.Spec.Kubelet = &karpv1beta1.KubeletConfiguration{MaxPods: ptr.To[int32](110), SystemReserved: map[string]string{"cpu": "100m"}}
		np.Spec.Disruption.ExpireAfter = karpv1.MustParseNillableDuration("168h")
	})
	if err := testEnv.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, src) })

	hub := &karpv1.NodePool{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("v1 consolidationPolicy = %s", hub.Spec.Disruption.ConsolidationPolicy)
	}
	if got := hub.Spec.Template.Spec.ExpireAfter.String(); got != "168h" {
		t.Errorf("v1 template.spec.expireAfter = %s, want 168h", got)
	}
	if ref := hub.Spec.Template.Spec.NodeClassRef; ref.Group != "karpenter.kwok.sh" || ref.Kind != "KWOKNodeClass" {
		t.Errorf("v1 nodeClassRef = %+v, want the provider's default node class", ref)
	}
	if hub.Annotations[conversion.AnnotationV1beta1Kubelet] == "" {
		t.Error("v1 object lost the kubelet")
	}

	back := &karpv1beta1.NodePool{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), back); err != nil {
		t.Fatal(err)
	}
	if specJSON(t, back.Spec) != specJSON(t, src.Spec) {
		t.Errorf("read back at v1beta1 differs:\nwrote %s\nread  %s", specJSON(t, src.Spec), specJSON(t, back.Spec))
	}
	for k := range back.Annotations {
		if conversion.IsCompatibilityAnnotation(k) {
			t.Errorf("a v1beta1 reader must not see the conversion's annotation %s", k)
		}
	}
}

// The other way: a v1 object with what v1beta1 cannot hold, updated through v1beta1 (as an
// old client would), keeps every v1 field.
func TestNodePoolWrittenAtV1UpdatedAtV1beta1(t *testing.T) {
	ctx := context.Background()
	src := test.NodePool(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 2 * 3600e9}
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("5m")
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, {Nodes: "10%"}}
	})
	if err := testEnv.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, src) })
	want := &karpv1.NodePool{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), want); err != nil {
		t.Fatal(err)
	}

	spoke := &karpv1beta1.NodePool{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), spoke); err != nil {
		t.Fatal(err)
	}
	if spoke.Spec.Disruption.ConsolidationPolicy != karpv1beta1.ConsolidationPolicyWhenUnderutilized || spoke.Spec.Disruption.ConsolidateAfter != nil {
		t.Errorf("v1beta1 disruption = %s/%v", spoke.Spec.Disruption.ConsolidationPolicy, spoke.Spec.Disruption.ConsolidateAfter)
	}
	spoke.Labels = map[string]string{"touched-by": "v1beta1-client"}
	if err := testEnv.Client.Update(ctx, spoke); err != nil {
		t.Fatal(err)
	}

	got := &karpv1.NodePool{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), got); err != nil {
		t.Fatal(err)
	}
	if specJSON(t, got.Spec) != specJSON(t, want.Spec) {
		t.Errorf("v1 spec changed by a v1beta1 update:\nbefore %s\nafter  %s", specJSON(t, want.Spec), specJSON(t, got.Spec))
	}
	if got.Labels["touched-by"] != "v1beta1-client" {
		t.Error("the v1beta1 client's change was lost")
	}
	for k := range got.Annotations {
		if conversion.IsCompatibilityAnnotation(k) {
			t.Errorf("a v1 reader must not see the conversion's annotation %s", k)
		}
	}
}

func TestNodeClaimRoundTripsThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	src := test.NodeClaim(func(nc *karpv1.NodeClaim) {
		nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 600e9}
		nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
	})
	if err := testEnv.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, src) })
	spoke := &karpv1beta1.NodeClaim{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), spoke); err != nil {
		t.Fatal(err)
	}
	if spoke.Spec.NodeClassRef.APIVersion != "karpenter.kwok.sh/v1alpha1" {
		t.Errorf("v1beta1 nodeClassRef = %+v", spoke.Spec.NodeClassRef)
	}
	got := &karpv1.NodeClaim{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(src), got); err != nil {
		t.Fatal(err)
	}
	if specJSON(t, got.Spec) != specJSON(t, src.Spec) {
		t.Errorf("v1 spec differs:\nwrote %s\nread  %s", specJSON(t, src.Spec), specJSON(t, got.Spec))
	}
}

func TestEC2NodeClassBothWays(t *testing.T) {
	ctx := context.Background()
	legacy := test.EC2NodeClassV1beta1(func(nc *awsv1beta1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To("Ubuntu") })
	if err := testEnv.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, legacy) })
	hub := &awsv1.EC2NodeClass{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(legacy), hub); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(hub.Spec.AMIFamily, "") != "AL2" {
		t.Errorf("Ubuntu must be served as AL2 in v1, got %v", ptr.Deref(hub.Spec.AMIFamily, "<nil>"))
	}
	back := &awsv1beta1.EC2NodeClass{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(legacy), back); err != nil {
		t.Fatal(err)
	}
	if specJSON(t, back.Spec) != specJSON(t, legacy.Spec) {
		t.Errorf("v1beta1 spec differs:\nwrote %s\nread  %s", specJSON(t, legacy.Spec), specJSON(t, back.Spec))
	}

	modern := test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20240807"}}
		nc.Spec.Kubelet = awsv1.KubeletConfiguration{"maxPods": {Raw: []byte("58")}}
	})
	if err := testEnv.Client.Create(ctx, modern); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, modern) })
	spoke := &awsv1beta1.EC2NodeClass{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(modern), spoke); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(spoke.Spec.AMIFamily, "") != "AL2023" {
		t.Errorf("v1beta1 amiFamily = %v, want AL2023 from the alias", ptr.Deref(spoke.Spec.AMIFamily, "<nil>"))
	}
	got := &awsv1.EC2NodeClass{}
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(modern), got); err != nil {
		t.Fatal(err)
	}
	if specJSON(t, got.Spec.AMISelectorTerms) != specJSON(t, modern.Spec.AMISelectorTerms) || specJSON(t, got.Spec.Kubelet) != specJSON(t, modern.Spec.Kubelet) {
		t.Errorf("v1 lost the pinned alias or the kubelet: %s %s", specJSON(t, got.Spec.AMISelectorTerms), specJSON(t, got.Spec.Kubelet))
	}
}
