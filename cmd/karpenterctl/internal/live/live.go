// Package live reads a running cluster for karpenterctl's commands that take a kubeconfig
// (`karpenterctl cost`): the objects the manager's cluster model holds, and the instance
// types each NodePool is priced by. It only reads; it never writes to the cluster.
package live

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Connect makes a client of the kubeconfig (empty: $KUBECONFIG or ~/.kube/config, as
// kubectl) and its context (empty: the current one); Context says which it used.
func Connect(kubeconfig, kubeContext string) (client.Reader, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	name := kubeContext
	if name == "" {
		name = raw.CurrentContext
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig context %q: %w", name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: install.NewScheme()})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the cluster of context %q: %w", name, err)
	}
	return c, name, nil
}

// Objects are what runs: namespaces, nodes, pods, NodeClaims and NodePools, and, with
// overlays, the NodeOverlays (none when their CRD is not installed).
func Objects(ctx context.Context, c client.Reader, overlays bool) (*snapshot.Objects, error) {
	objs := &snapshot.Objects{}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range nss.Items {
		objs.Namespaces = append(objs.Namespaces, &nss.Items[i])
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		// Only pods on a node or nominated to one are charged; finished ones hold nothing.
		if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			objs.Pods = append(objs.Pods, p)
		}
	}
	var claims karpv1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	for i := range claims.Items {
		objs.NodeClaims = append(objs.NodeClaims, &claims.Items[i])
	}
	var pools karpv1.NodePoolList
	if err := c.List(ctx, &pools); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	for i := range pools.Items {
		objs.NodePools = append(objs.NodePools, &pools.Items[i])
	}
	if overlays {
		var list karpv1alpha1.NodeOverlayList
		if err := c.List(ctx, &list); err != nil && !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("listing NodeOverlays: %w", err)
		}
		for i := range list.Items {
			objs.NodeOverlays = append(objs.NodeOverlays, &list.Items[i])
		}
	}
	return objs, nil
}

// Prices says where each NodePool's instance types, and so its nodes' prices, come from.
type Prices struct {
	// File, when set, prices every NodePool (--instance-types).
	File *catalog.File
	// Provider is the cluster's cloud provider: kwok reads each NodePool's KWOKNodeClass
	// catalog as the manager does; aws prices by the built-in EC2 catalog.
	Provider string
	Reader   client.Reader

	byCatalog map[string][]*cloudprovider.InstanceType
}

// Source names what prices nodes, for the report.
func (p *Prices) Source(name string) string {
	switch {
	case p.File != nil:
		return "the catalog " + name
	case p.Provider == "kwok":
		return "each NodePool's KWOKNodeClass catalog"
	default:
		return "the built-in EC2 catalog (on-demand list prices, Spot estimates)"
	}
}

// InstanceTypes are a NodePool's instance types as priced here.
func (p *Prices) InstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if p.byCatalog == nil {
		p.byCatalog = map[string][]*cloudprovider.InstanceType{}
	}
	name := "embedded"
	switch {
	case p.File != nil:
		name = "--instance-types"
	case p.Provider == "kwok":
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			break
		}
		var nc kwokv1alpha1.KWOKNodeClass
		if err := p.Reader.Get(ctx, client.ObjectKey{Name: ref.Name}, &nc); err != nil {
			return nil, fmt.Errorf("NodePool %s: KWOKNodeClass %s: %w", np.Name, ref.Name, err)
		}
		if nc.Spec.Catalog != "" {
			name = nc.Spec.Catalog
		}
	}
	if its, ok := p.byCatalog[name]; ok {
		return its, nil
	}
	var f *catalog.File
	switch name {
	case "--instance-types":
		f = p.File
	case "embedded":
		f = catalog.Embedded()
	case catalog.UpstreamKWOKName:
		f = catalog.UpstreamKWOK()
	default:
		var err error
		if f, err = catalog.Load(name); err != nil {
			return nil, fmt.Errorf("NodePool %s: its KWOKNodeClass catalog %s is a file of the controller's; give a copy with --instance-types: %w", np.Name, name, err)
		}
	}
	its := f.ForProvider()
	p.byCatalog[name] = its
	return its, nil
}
