package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/karpenter-policy/karpenter/providers/aws/pricelist"
)

// Settings are what the AWS provider needs to know about its cluster and account; the
// manager fills them from flags with environment fallbacks named as upstream's
// (docs/aws.md, "Settings").
type Settings struct {
	// ClusterName tags and names what the provider creates (kubernetes.io/cluster/<name>).
	ClusterName string
	// ClusterEndpoint is the API server nodes join.
	ClusterEndpoint string
	// Region is the AWS region; empty takes the SDK's (AWS_REGION, the profile, IMDS).
	Region string
	// Endpoint, when set, is the base URL of every AWS API (a local emulator); empty uses
	// AWS's endpoints, or AWS_ENDPOINT_URL if the environment sets it.
	Endpoint string
	// InterruptionQueue is the SQS queue EventBridge sends interruption events to; empty
	// turns interruption handling off.
	InterruptionQueue string
	// IsolatedVPC means no route to the Pricing API: on-demand prices come from the
	// built-in table only.
	IsolatedVPC bool
	// KubernetesVersion is the cluster's minor version ("1.37"), for AMI aliases.
	KubernetesVersion string
	// ClusterCABundle is the API server's CA certificate (PEM, base64), which nodes trust;
	// empty leaves it to the AMI's bootstrap to look up.
	ClusterCABundle string
}

// Validate names the first setting that is missing.
func (s Settings) Validate() error {
	if s.ClusterName == "" {
		return fmt.Errorf("--cluster-name (CLUSTER_NAME) is required with --cloud-provider=aws")
	}
	return nil
}

// Clients are the AWS API clients the provider uses, all from one SDK configuration.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	IAM     *iam.Client
	SQS     *sqs.Client
	Pricing *pricing.Client
	Region  string
}

// NewClients loads the SDK's configuration (credentials from the usual chain) for the
// settings' region and endpoint. Requests are retried with the SDK's standard retryer
// (throttling and 5xx, exponential backoff with jitter), up to 5 attempts.
func NewClients(ctx context.Context, s Settings) (*Clients, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.MaxBackoff = 5 * time.Second
			})
		}),
	}
	if s.Region != "" {
		opts = append(opts, config.WithRegion(s.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS SDK configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region: set --aws-region or AWS_REGION")
	}
	if s.Endpoint != "" {
		cfg.BaseEndpoint = aws.String(s.Endpoint)
	}
	return &Clients{
		EC2: ec2.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = pricelist.Region(cfg.Region) }),
		Region:  cfg.Region,
	}, nil
}
