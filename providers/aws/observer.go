package aws

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// userDataMaxBytes is EC2's limit on user data, before base64; a launch logs once its node
// class's user data reaches nine tenths of it, as upstream, before EC2 refuses it.
const userDataMaxBytes = 16384

// Observer receives what the provider measures for the manager's metrics, as upstream's AWS
// provider exports them (docs/metrics.md, "AWS provider"); cmd/karpenter wires it to
// controllers/metrics, which the provider must not import. A nil func is skipped. Set it
// before the provider is used.
type Observer struct {
	// Batch is called for each batch a batcher sends: the batcher's name (create_fleet,
	// describe_instances, terminate_instances), how many requests it carries, and how long
	// its window was open.
	Batch func(name string, size int, window time.Duration)
	// LaunchFailure is called for each offering a CreateFleet reports an error for: its
	// zone and zone ID, the capacity type asked for, and the error's category
	// (launchFailureReason).
	LaunchFailure func(zone, zoneID, capacityType, reason string)
	// TerminationFailure is called for each TerminateInstances that failed for an instance
	// still there: the instance's zone and zone ID ("" when unknown).
	TerminationFailure func(zone, zoneID string)
	// UserData is called with the size, in bytes before base64, of the user data a launch
	// rendered for an EC2NodeClass; NodeClassGone once the node class's launch templates are
	// deleted, with it.
	UserData      func(nodeClass string, bytes int)
	NodeClassGone func(nodeClass string)
}

func (o Observer) batch(name string) func(size int, window time.Duration) {
	return func(size int, window time.Duration) {
		if o.Batch != nil {
			o.Batch(name, size, window)
		}
	}
}

// observeUserData reports the size of a node class's rendered user data (base64, as EC2
// takes it) before base64, and logs when it comes near EC2's limit.
func (p *Provider) observeUserData(ctx context.Context, nodeClass, userData string) {
	n := base64.StdEncoding.DecodedLen(len(userData)) - strings.Count(userData[max(0, len(userData)-2):], "=")
	if p.Observe.UserData != nil {
		p.Observe.UserData(nodeClass, n)
	}
	if n >= userDataMaxBytes*9/10 {
		log.FromContext(ctx).Info("rendered user data is near EC2's limit", "EC2NodeClass", nodeClass,
			"bytes", n, "limit", userDataMaxBytes)
	}
}

// launchFailureCategories name a CreateFleet error by what its code or message holds, in
// order, as upstream's AWS provider categorizes launch failures; the first match wins.
var launchFailureCategories = []struct{ holds, reason string }{
	{"AuthFailure.ServiceLinkedRoleCreationNotPermitted", "SpotSLRCreationFailed"},
	{"Not authorized for images", "AMIAuthorizationFailure"},
	{"UnauthorizedOperation", "Unauthorized"},
	{"AccessDenied", "Unauthorized"},
	{"AuthFailure", "Unauthorized"},
	{"belong to different networks", "SecurityGroupSubnetVPCMismatch"},
	{"iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"},
	{"InvalidLaunchTemplateId.NotFound", "LaunchTemplateNotFound"},
	{"User data is limited to", "UserDataSizeLimitExceeded"},
	{"InvalidAMIID.Malformed", "InvalidAMIID"},
	{"InvalidAMIID.NotFound", "AMINotFound"},
	{"RequestLimitExceeded", "RequestLimitExceeded"},
	{"InternalError", "InternalError"},
	{"not eligible for Free Tier", "FreeTierIneligible"},
	{"MaxFleetCountExceeded", "FleetQuotaExceeded"},
	{"PendingVerification", "AccountPendingVerification"},
	{"MaxSpotInstanceCountExceeded", "SpotQuotaExceeded"},
	{"VcpuLimitExceeded", "VCPULimitExceeded"},
	{"InsufficientFreeAddressesInSubnet", "InsufficientFreeAddressesInSubnet"},
}

// launchFailureReason is the category of a CreateFleet error; LaunchFailed when none fits
// (insufficient capacity among them, as upstream).
func launchFailureReason(code, message string) string {
	s := code + ": " + message
	for _, c := range launchFailureCategories {
		if strings.Contains(s, c.holds) {
			return c.reason
		}
	}
	return "LaunchFailed"
}
