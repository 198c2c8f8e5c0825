package aws

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Resolver turns an EC2NodeClass's selectors into what EC2 has: subnets, security groups,
// AMIs and the instance profile. Its errors name what matched nothing.
type Resolver struct {
	Clients  *Clients
	Settings Settings
	// forget drops a launch template from the provider's cache of those it made, once
	// DeleteLaunchTemplates deletes it; nil when the resolver serves no provider.
	forget func(name string)
	// gone is told the name of a node class whose launch templates DeleteLaunchTemplates
	// deleted; nil when the resolver serves no provider.
	gone func(nodeClass string)
}

// filters are the EC2 filters of one selector term: an id, a name, or tags ("*" is any value).
func filters(idKey, id, nameKey, name string, tags map[string]string) []ec2types.Filter {
	var out []ec2types.Filter
	if id != "" {
		out = append(out, ec2types.Filter{Name: aws.String(idKey), Values: []string{id}})
	}
	if name != "" {
		out = append(out, ec2types.Filter{Name: aws.String(nameKey), Values: []string{name}})
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

// describeTerm says what a term selects, for errors: "tag karpenter.sh/discovery=local".
func describeTerm(id, name string, tags map[string]string) string {
	var parts []string
	if id != "" {
		parts = append(parts, "id "+id)
	}
	if name != "" {
		parts = append(parts, "name "+name)
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		parts = append(parts, fmt.Sprintf("tag %s=%s", k, tags[k]))
	}
	return strings.Join(parts, ", ")
}

// Subnets are the subnets any term selects, the ones with the most free addresses first.
func (r *Resolver) Subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, error) {
	seen := map[string]ec2types.Subnet{}
	var terms []string
	for _, t := range nc.Spec.SubnetSelectorTerms {
		terms = append(terms, describeTerm(t.ID, "", t.Tags))
		p := ec2.NewDescribeSubnetsPaginator(r.Clients.EC2, &ec2.DescribeSubnetsInput{Filters: filters("subnet-id", t.ID, "", "", t.Tags)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing subnets (%s): %w", describeTerm(t.ID, "", t.Tags), err)
			}
			for _, s := range page.Subnets {
				seen[aws.ToString(s.SubnetId)] = s
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("subnet selector matched no subnet: %s", strings.Join(terms, "; "))
	}
	subnets := make([]ec2types.Subnet, 0, len(seen))
	for _, s := range seen {
		subnets = append(subnets, s)
	}
	sort.Slice(subnets, func(i, j int) bool {
		a, b := aws.ToInt32(subnets[i].AvailableIpAddressCount), aws.ToInt32(subnets[j].AvailableIpAddressCount)
		if a != b {
			return a > b
		}
		return aws.ToString(subnets[i].SubnetId) < aws.ToString(subnets[j].SubnetId)
	})
	out := make([]awsv1.Subnet, 0, len(subnets))
	for _, s := range subnets {
		out = append(out, awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	return out, nil
}

// SecurityGroups are the security groups any term selects, by id.
func (r *Resolver) SecurityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error) {
	seen := map[string]awsv1.SecurityGroup{}
	var terms []string
	for _, t := range nc.Spec.SecurityGroupSelectorTerms {
		terms = append(terms, describeTerm(t.ID, t.Name, t.Tags))
		p := ec2.NewDescribeSecurityGroupsPaginator(r.Clients.EC2, &ec2.DescribeSecurityGroupsInput{Filters: filters("group-id", t.ID, "group-name", t.Name, t.Tags)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing security groups (%s): %w", describeTerm(t.ID, t.Name, t.Tags), err)
			}
			for _, g := range page.SecurityGroups {
				seen[aws.ToString(g.GroupId)] = awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("security group selector matched no security group: %s", strings.Join(terms, "; "))
	}
	out := make([]awsv1.SecurityGroup, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// archOf maps EC2's architecture names to Kubernetes'.
func archOf(ec2Arch string) string {
	switch ec2Arch {
	case "x86_64", "x86_64_mac":
		return karpv1.ArchitectureAmd64
	case "arm64", "arm64_mac":
		return karpv1.ArchitectureArm64
	}
	return ec2Arch
}

// AMIs resolves the AMI selector: an alias through EKS's public SSM parameters for each
// architecture, or id, name and tag terms through DescribeImages. For each architecture the
// newest image is used (docs/aws.md, "AMI selection").
func (r *Resolver) AMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error) {
	var images []ec2types.Image
	// variants are the alias variants of the images an alias resolved to, by image id.
	variants := map[string][]Variant{}
	for _, t := range nc.Spec.AMISelectorTerms {
		switch {
		case t.Alias != "":
			byID, err := r.aliasImageIDs(ctx, t.Alias)
			if err != nil {
				return nil, err
			}
			ids := make([]string, 0, len(byID))
			for id, vs := range byID {
				ids = append(ids, id)
				variants[id] = append(variants[id], vs...)
			}
			sort.Strings(ids)
			found, err := r.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
			if err != nil {
				return nil, err
			}
			images = append(images, found...)
		case t.SSMParameter != "":
			out, err := r.Clients.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(t.SSMParameter)})
			if err != nil {
				return nil, fmt.Errorf("reading SSM parameter %s: %w", t.SSMParameter, err)
			}
			found, err := r.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})
			if err != nil {
				return nil, err
			}
			images = append(images, found...)
		default:
			in := &ec2.DescribeImagesInput{Filters: filters("image-id", t.ID, "name", t.Name, t.Tags)}
			switch {
			case t.Owner != "":
				in.Owners = []string{t.Owner}
			case t.ID == "":
				in.Owners = []string{"self", "amazon"}
			}
			found, err := r.describeImages(ctx, in)
			if err != nil {
				return nil, err
			}
			images = append(images, found...)
		}
	}
	// The newest image per architecture and alias variant (a selector by id, name or tags has
	// no variant: its image serves every instance type of its architecture).
	type key struct {
		arch    string
		variant Variant
	}
	newest := map[key]ec2types.Image{}
	for _, img := range images {
		arch := archOf(string(img.Architecture))
		vs := variants[aws.ToString(img.ImageId)]
		if len(vs) == 0 {
			vs = []Variant{""}
		}
		for _, v := range vs {
			k := key{arch, v}
			if cur, ok := newest[k]; !ok || aws.ToString(img.CreationDate) > aws.ToString(cur.CreationDate) ||
				(aws.ToString(img.CreationDate) == aws.ToString(cur.CreationDate) && aws.ToString(img.ImageId) < aws.ToString(cur.ImageId)) {
				newest[k] = img
			}
		}
	}
	if len(newest) == 0 {
		var terms []string
		for _, t := range nc.Spec.AMISelectorTerms {
			if t.Alias != "" {
				terms = append(terms, "alias "+t.Alias)
			} else {
				terms = append(terms, describeTerm(t.ID, t.Name, t.Tags))
			}
		}
		return nil, fmt.Errorf("AMI selector matched no image: %s", strings.Join(terms, "; "))
	}
	out := make([]awsv1.AMI, 0, len(newest))
	for k, img := range newest {
		deprecated := false
		if d := aws.ToString(img.DeprecationTime); d != "" {
			if t, err := time.Parse(time.RFC3339, d); err == nil && t.Before(time.Now()) {
				deprecated = true
			}
		}
		reqs := append([]corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{k.arch}}},
			k.variant.Requirements()...)
		out = append(out, awsv1.AMI{ID: aws.ToString(img.ImageId), Name: aws.ToString(img.Name), Deprecated: deprecated, Requirements: reqs})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return fmt.Sprint(out[i].Requirements) < fmt.Sprint(out[j].Requirements)
	})
	return out, nil
}

func (r *Resolver) describeImages(ctx context.Context, in *ec2.DescribeImagesInput) ([]ec2types.Image, error) {
	var out []ec2types.Image
	p := ec2.NewDescribeImagesPaginator(r.Clients.EC2, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing images: %w", err)
		}
		for _, img := range page.Images {
			if img.State == ec2types.ImageStateAvailable || img.State == "" {
				out = append(out, img)
			}
		}
	}
	return out, nil
}

// aliasImageIDs reads the image ids of an alias (family@version) for every architecture and
// variant the family publishes, from the public SSM parameters for the cluster's Kubernetes
// version, with the variants each id serves. A variant not published for a version is left
// out; an alias none of whose parameters exist is an error naming them.
func (r *Resolver) aliasImageIDs(ctx context.Context, alias string) (map[string][]Variant, error) {
	params, err := AliasParameters(alias, r.Settings.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	ids := map[string][]Variant{}
	var missing []string
	for _, p := range params {
		out, err := r.Clients.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(p.Name)})
		if err != nil {
			var nf interface{ ErrorCode() string }
			if errors.As(err, &nf) && nf.ErrorCode() == "ParameterNotFound" {
				if p.Variant == VariantStandard {
					missing = append(missing, p.Name)
				}
				continue
			}
			return nil, fmt.Errorf("resolving alias %s through SSM parameter %s: %w", alias, p.Name, err)
		}
		id := aws.ToString(out.Parameter.Value)
		ids[id] = append(ids[id], p.Variant)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("alias %s resolves to no AMI for Kubernetes %s: no SSM parameter %s", alias, r.Settings.KubernetesVersion, strings.Join(missing, ", "))
	}
	return ids, nil
}

// Variant is an AMI alias's build for a kind of instance type, as upstream resolves them:
// the standard build for instance types without accelerators, the NVIDIA build (drivers and
// container toolkit) for NVIDIA GPUs, the Neuron build for AWS Inferentia and Trainium.
type Variant string

// The variants.
const (
	VariantStandard Variant = "standard"
	VariantNvidia   Variant = "nvidia"
	VariantNeuron   Variant = "neuron"
)

// Requirements are the instance type labels the variant's image serves.
func (v Variant) Requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case VariantStandard:
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: karpv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist}}
	case VariantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceGPUManufacturer, Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia"}}}
	case VariantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceAcceleratorManufacturer, Operator: corev1.NodeSelectorOpIn, Values: []string{"aws"}}}
	}
	return nil
}

// AliasParameter is a public SSM parameter an alias reads, with the variant it names.
type AliasParameter struct {
	Name    string
	Variant Variant
}

// AliasParameters are the public SSM parameters an AMI alias (family@version) reads, one per
// architecture and variant, as EKS and Bottlerocket publish them for Kubernetes version k8s:
// al2023 standard, nvidia (x86_64, arm64) and neuron (x86_64); al2 standard and its
// accelerated build (amazon-linux-2-gpu: NVIDIA and Neuron, x86_64); bottlerocket standard
// (which runs Neuron too) and nvidia.
func AliasParameters(alias, k8s string) ([]AliasParameter, error) {
	family, version, ok := strings.Cut(alias, "@")
	if !ok || family == "" || version == "" {
		return nil, fmt.Errorf("alias %q is not family@version", alias)
	}
	if k8s == "" {
		return nil, fmt.Errorf("the cluster's Kubernetes version is unknown; AMI aliases need it")
	}
	var out []AliasParameter
	add := func(name string, vs ...Variant) {
		for _, v := range vs {
			out = append(out, AliasParameter{Name: name, Variant: v})
		}
	}
	switch family {
	case "al2023":
		for _, b := range []struct {
			arch    string
			variant Variant
		}{{"x86_64", VariantStandard}, {"arm64", VariantStandard}, {"x86_64", VariantNvidia}, {"arm64", VariantNvidia}, {"x86_64", VariantNeuron}} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s", k8s, b.arch, b.variant)
			if version == "latest" {
				add(base+"/recommended/image_id", b.variant)
			} else {
				add(fmt.Sprintf("%s/amazon-eks-node-al2023-%s-%s-%s-%s/image_id", base, b.arch, b.variant, k8s, version), b.variant)
			}
		}
	case "al2":
		for _, b := range []struct {
			flavour, name string
			variants      []Variant
		}{{"amazon-linux-2", "amazon-eks-node", []Variant{VariantStandard}}, {"amazon-linux-2-arm64", "amazon-eks-arm64-node", []Variant{VariantStandard}},
			{"amazon-linux-2-gpu", "amazon-eks-gpu-node", []Variant{VariantNvidia, VariantNeuron}}} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s", k8s, b.flavour)
			if version == "latest" {
				add(base+"/recommended/image_id", b.variants...)
			} else {
				add(fmt.Sprintf("%s/%s-%s-%s/image_id", base, b.name, k8s, version), b.variants...)
			}
		}
	case "bottlerocket":
		v := strings.TrimPrefix(version, "v")
		for _, arch := range []string{"x86_64", "arm64"} {
			add(fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/%s/%s/image_id", k8s, arch, v), VariantStandard, VariantNeuron)
		}
		for _, arch := range []string{"x86_64", "arm64"} {
			add(fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s-nvidia/%s/%s/image_id", k8s, arch, v), VariantNvidia)
		}
	default:
		return nil, fmt.Errorf("alias family %q has no public SSM parameters this provider reads (al2023, al2, bottlerocket)", family)
	}
	return out, nil
}

// InstanceProfile is the instance profile nodes launch with: the one the node class names,
// which must exist, or one for its role, created and tagged if missing.
func (r *Resolver) InstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil {
		name := *nc.Spec.InstanceProfile
		if _, err := r.Clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
			return "", fmt.Errorf("instance profile %s: %w", name, err)
		}
		return name, nil
	}
	name := r.ProfileName(nc)
	role := nc.Spec.Role
	if i := strings.LastIndex(role, "/"); i >= 0 { // an ARN or a path names the same role
		role = role[i+1:]
	}
	out, err := r.Clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var profile *iamtypes.InstanceProfile
	switch {
	case err == nil:
		profile = out.InstanceProfile
	case isNotFound(err):
		created, err := r.Clients.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
			Tags: []iamtypes.Tag{
				{Key: aws.String("kubernetes.io/cluster/" + r.Settings.ClusterName), Value: aws.String("owned")},
				{Key: aws.String(karpv1.LabelEC2NodeClass), Value: aws.String(nc.Name)},
				{Key: aws.String("topology.kubernetes.io/region"), Value: aws.String(r.Clients.Region)},
			}})
		if err != nil {
			return "", fmt.Errorf("creating instance profile %s for role %s: %w", name, role, err)
		}
		profile = created.InstanceProfile
	default:
		return "", fmt.Errorf("reading instance profile %s: %w", name, err)
	}
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			return name, nil
		}
	}
	for _, old := range profile.Roles { // the node class's role changed: one role per profile
		if _, err := r.Clients.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: old.RoleName}); err != nil {
			return "", fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(old.RoleName), name, err)
		}
	}
	if _, err := r.Clients.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		return "", fmt.Errorf("adding role %s to instance profile %s: %w", role, name, err)
	}
	return name, nil
}

// ProfileName is the name of the instance profile the provider manages for a node class:
// the cluster's name and a hash of the region and the node class's name and UID, so that it
// is unique per node class and stable while the node class lives.
func (r *Resolver) ProfileName(nc *awsv1.EC2NodeClass) string {
	sum := sha256.Sum256([]byte(r.Clients.Region + "/" + nc.Name + "/" + string(nc.UID)))
	return fmt.Sprintf("%s_%x", r.Settings.ClusterName, sum[:8])
}

// DeleteInstanceProfile removes the instance profile the provider created for a node class,
// its role first; a profile already gone is not an error.
func (r *Resolver) DeleteInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	if nc.Spec.InstanceProfile != nil {
		return nil // the user's, not ours
	}
	name := r.ProfileName(nc)
	out, err := r.Clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading instance profile %s: %w", name, err)
	}
	for _, role := range out.InstanceProfile.Roles {
		if _, err := r.Clients.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: role.RoleName}); err != nil && !isNotFound(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(role.RoleName), name, err)
		}
	}
	if _, err := r.Clients.IAM.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	return nil
}

// DeleteLaunchTemplates deletes the launch templates the provider made for the node class
// (tagged with it and the cluster), paged; ones already gone are no error.
func (r *Resolver) DeleteLaunchTemplates(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	pages := ec2.NewDescribeLaunchTemplatesPaginator(r.Clients.EC2, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + clusterTag(r.Settings.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag:" + TagNodeClass), Values: []string{nc.Name}},
	}})
	var names []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the launch templates of EC2NodeClass %s: %w", nc.Name, err)
		}
		for _, lt := range page.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
	}
	for _, name := range names {
		if r.forget != nil {
			r.forget(name)
		}
		if _, err := r.Clients.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting launch template %s: %w", name, err)
		}
	}
	if r.gone != nil {
		r.gone(nc.Name)
	}
	return nil
}

// isNotFound reports an AWS "does not exist" error of any service.
func isNotFound(err error) bool {
	var coded interface{ ErrorCode() string }
	if !errors.As(err, &coded) {
		return false
	}
	switch coded.ErrorCode() {
	case "NoSuchEntity", "ParameterNotFound", "InvalidInstanceID.NotFound", "InvalidLaunchTemplateName.NotFoundException", "NotFoundException":
		return true
	}
	return false
}
