// Package aws is the AWS provider: EC2NodeClass instances launched through EC2. So far it
// holds the part the solver depends on without an EC2 client, turning the capacity
// reservations an EC2NodeClass selected into reserved offerings; the client side (instance
// types, pricing, launch, interruption) is built on aws-sdk-go-v2 in this package as well.
// It must not be imported by the controllers or the solver, which see it only through
// cloudprovider.CloudProvider.
package aws
