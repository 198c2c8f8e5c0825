package aws_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/interruption"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
	"github.com/karpenter-policy/karpenter/test/env"
)

// TestInstanceStatusChecks: EC2's status checks, as the emulator reports them through its
// tags, are read by the AWS provider and acted on by the health poller as upstream's AWS
// provider does: a system check failing for more than two minutes deletes the NodeClaim with
// its termination timestamp set (no graceful drain), a scheduled retirement deletes it to
// drain, a check failing for less than two minutes and an instance of no NodeClaim are left
// alone; each unhealthy instance counts once per category while it stays unhealthy.
func TestInstanceStatusChecks(t *testing.T) {
	e := awsemu.Start(t, "local")
	ctx := context.Background()
	clients, p := emulatedProvider(t, e)
	run := func(tags map[string]string) (id, providerID string) { return runInstance(t, clients, e, tags) }
	claim := func(name, providerID string) *karpv1.NodeClaim {
		nc := test.NodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Name = name
			nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: "on-demand"}
			// Held by a finalizer, so that what the poller wrote can be read after the delete.
			nc.Finalizers = []string{"test.karpenter.sh/hold"}
		})
		if err := testEnv.Client.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = testEnv.Client.Patch(context.Background(), nc, client.RawPatch(client.Merge.Type(), []byte(`{"metadata":{"finalizers":null}}`)))
		})
		nc.Status.ProviderID = providerID
		if err := testEnv.Client.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	longAgo := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	_, brokenID := run(map[string]string{"emulator.karpenter.sh/system-status-impaired-since": longAgo})
	_, retiringID := run(map[string]string{"emulator.karpenter.sh/event-code": "instance-retirement"})
	justID, justPID := run(map[string]string{"emulator.karpenter.sh/instance-status-impaired-since": time.Now().Add(-30 * time.Second).UTC().Format(time.RFC3339)})
	run(map[string]string{"emulator.karpenter.sh/system-status-impaired-since": longAgo}) // of no NodeClaim
	_, healthyID := run(nil)
	broken, retiring, just, healthy := claim("broken", brokenID), claim("retiring", retiringID), claim("just-impaired", justPID), claim("healthy", healthyID)

	counted := func(category string) float64 {
		return testutil.ToFloat64(metrics.InstanceStatusUnhealthy.WithLabelValues(category))
	}
	before := map[string]float64{"SystemStatus": counted("SystemStatus"), "EventStatus": counted("EventStatus"), "InstanceStatus": counted("InstanceStatus")}
	disruptedBefore := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues("system_status", "default", "on-demand", "", "graceful"))
	recorder := events.NewFakeRecorder(20)
	poller := interruption.NewHealthPoller(env.Indexed(testEnv.Client), p, p, recorder, time.Minute)
	for i := 0; i < 2; i++ { // twice: an instance still unhealthy is not counted again
		if err := poller.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	get := func(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
		got := &karpv1.NodeClaim{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := get(broken); got.DeletionTimestamp == nil || got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] == "" {
		t.Errorf("the NodeClaim of an instance whose system check failed 10 minutes ago: deleted %v, termination timestamp %q; want deleted with a timestamp",
			got.DeletionTimestamp, got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	}
	if got := get(retiring); got.DeletionTimestamp == nil || got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != "" {
		t.Errorf("the NodeClaim of an instance scheduled for retirement: deleted %v, termination timestamp %q; want deleted, drained gracefully",
			got.DeletionTimestamp, got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	}
	for _, nc := range []*karpv1.NodeClaim{just, healthy} {
		if got := get(nc); got.DeletionTimestamp != nil {
			t.Errorf("NodeClaim %s was deleted; its instance's checks have not failed for two minutes", nc.Name)
		}
	}
	for category, want := range map[string]float64{"SystemStatus": 1, "EventStatus": 1, "InstanceStatus": 0} {
		if got := counted(category) - before[category]; got != want {
			t.Errorf("karpenter_interruption_instance_status_unhealthy_total{category=%q} rose by %v over two polls, want %v", category, got, want)
		}
	}
	if got := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues("system_status", "default", "on-demand", "", "graceful")) - disruptedBefore; got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=\"system_status\"} rose by %v, want 1", got)
	}
	var seen []string
	for len(recorder.Events) > 0 {
		seen = append(seen, <-recorder.Events)
	}
	joined := strings.Join(seen, "\n")
	for _, want := range []string{"Warning InstanceUnhealthy Instance " + brokenID[strings.LastIndex(brokenID, "/")+1:] + " failed its system status check",
		"Warning InstanceUnhealthy Instance " + retiringID[strings.LastIndex(retiringID, "/")+1:] + " has a scheduled event (instance-retirement)",
		"Warning TerminatingOnInterruption Interruption triggered termination for the NodeClaim: its pods are deleted without a graceful drain",
		"Warning TerminatingOnInterruption Interruption triggered termination for the NodeClaim: its node drains now"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no event %q in:\n%s", want, joined)
		}
	}

	// Two minutes on, the instance check counts too.
	if _, err := clients.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{justID}, Tags: []ec2types.Tag{{
		Key: awssdk.String("emulator.karpenter.sh/instance-status-impaired-since"), Value: awssdk.String(longAgo)}}}); err != nil {
		t.Fatal(err)
	}
	if err := poller.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(just); got.DeletionTimestamp == nil {
		t.Error("the NodeClaim of an instance whose instance check failed 10 minutes ago was not deleted")
	}
	if got := counted("InstanceStatus") - before["InstanceStatus"]; got != 1 {
		t.Errorf("karpenter_interruption_instance_status_unhealthy_total{category=\"InstanceStatus\"} rose by %v, want 1", got)
	}
}
