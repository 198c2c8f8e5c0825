// Package audit writes the audit of what runs (docs/policies.md, "Audit") as OpenReports: a
// Report per namespace with the results about it and a ClusterReport with those about
// NodePools and NodeClaims. It judges the cluster model with scheduling/audit at the audit
// enforcement point, on change and at least every --audit-interval, adds the decisions the
// controllers took (state.PolicyDecisions), and writes only on the leader, only what changed.
// After a restart or a failover it restores those decisions from the reports, so that a new
// leader reports what the last one did. It writes nothing but its own reports.
package audit

import (
	"context"
	"fmt"
	"sort"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	schedaudit "github.com/karpenter-policy/karpenter/scheduling/audit"
)

// Names and labels of the reports the audit writes.
const (
	// ReportName is the name of every Report (one per namespace) and of the ClusterReport.
	ReportName = "karpenter-policy"
	// Source is the reports' and results' source.
	Source = "karpenter-policy"
	// ManagedByLabel marks the reports as the audit's.
	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// DefaultInterval is --audit-interval's default: how often the audit runs at least.
const DefaultInterval = time.Minute

// minGap is how soon after a run a change runs the audit again: a scale-out changes the model
// with every pod bound.
const minGap = 5 * time.Second

// decisionTTL is how long a decision the controllers took stays in the reports when nothing
// decides it again; the provisioner decides held pods again at every batch.
const decisionTTL = time.Hour

// maxResults bounds one report's results; the rest are counted in a result that says so.
const maxResults = 2000

// Controller runs the audit.
type Controller struct {
	client   client.Client
	cluster  *state.Cluster
	cloud    cloudprovider.CloudProvider
	engine   *policies.Engine
	clock    clock.Clock
	interval time.Duration

	restored   bool
	revision   uint64
	generation uint64
	last       time.Time
}

// NewController returns the audit controller; interval is --audit-interval.
func NewController(c client.Client, cluster *state.Cluster, cloud cloudprovider.CloudProvider, engine *policies.Engine, clk clock.Clock, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{client: c, cluster: cluster, cloud: cloud, engine: engine, clock: clk, interval: interval}
}

// NeedLeaderElection is true: only the leader writes reports.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs the audit until ctx ends: when the cluster model, the policies or the exceptions
// changed (at most every 5 s), and at least every interval.
func (c *Controller) Start(ctx context.Context) error {
	tick := min(c.interval, minGap)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(tick):
		}
		if !c.cluster.Synced() {
			continue
		}
		if err := c.Reconcile(ctx, false); err != nil {
			log.FromContext(ctx).Error(err, "audit")
		}
	}
}

// Reconcile runs the audit if something changed since the last run or the interval passed;
// with force, whatever changed.
func (c *Controller) Reconcile(ctx context.Context, force bool) error {
	if !c.restored {
		if err := c.restore(ctx); err != nil {
			return err
		}
		c.restored = true
	}
	rev, gen, now := c.cluster.Revision(), c.engine.Generation(), c.clock.Now()
	if !force && rev == c.revision && gen == c.generation && now.Sub(c.last) < c.interval {
		return nil
	}
	if err := c.run(ctx, now); err != nil {
		return err
	}
	c.revision, c.generation, c.last = rev, gen, now
	return nil
}

// run judges the cluster and writes the reports.
func (c *Controller) run(ctx context.Context, now time.Time) error {
	snap, err := c.cluster.Placed(ctx, c.cloud)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	var pols policyv1.CapacityPolicyList
	if err := c.client.List(ctx, &pols); err != nil {
		return err
	}
	in := schedaudit.Input{Snapshot: snap, Engine: c.engine, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{},
		NodePools: snap.Objects.NodePools, Now: now}
	for _, ns := range snap.Objects.Namespaces {
		in.Namespaces[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for _, b := range snap.Objects.CapacityBudgets {
		if b.DeletionTimestamp != nil {
			continue
		}
		if prev, ok := in.Budgets[b.Namespace]; !ok || b.Name < prev.Name {
			in.Budgets[b.Namespace] = b
		}
	}
	for _, b := range snap.Objects.ClusterCapacityBudgets {
		if b.DeletionTimestamp == nil {
			in.ClusterBudgets = append(in.ClusterBudgets, b)
		}
	}
	for i := range pols.Items {
		if pols.Items[i].DeletionTimestamp == nil {
			in.Policies = append(in.Policies, &pols.Items[i])
		}
	}
	results := schedaudit.Evaluate(ctx, in)
	decisions := c.cluster.PolicyDecisions()
	decisions.Forget(func(_ schedaudit.Result, at time.Time) bool { return now.Sub(at) > decisionTTL })
	decided, ats := decisions.List()
	when := map[string]time.Time{}
	for i, r := range decided {
		when[r.Key()] = ats[i]
	}
	results = append(results, decided...)
	return c.write(ctx, results, when, now)
}

// restore takes the decisions of the reports the last leader wrote back into the model.
func (c *Controller) restore(ctx context.Context) error {
	sel := client.MatchingLabels{ManagedByLabel: Source}
	var reports reportsv1alpha1.ReportList
	if err := c.client.List(ctx, &reports, sel); err != nil {
		return fmt.Errorf("listing reports: %w", err)
	}
	var cluster reportsv1alpha1.ClusterReportList
	if err := c.client.List(ctx, &cluster, sel); err != nil {
		return fmt.Errorf("listing cluster reports: %w", err)
	}
	restore := func(ns string, rs []reportsv1alpha1.ReportResult) {
		for _, rr := range rs {
			if rr.Properties["decision"] == "" {
				continue
			}
			c.cluster.PolicyDecisions().Record(fromReport(ns, rr), time.Unix(rr.Timestamp.Seconds, int64(rr.Timestamp.Nanos)))
		}
	}
	for _, r := range reports.Items {
		restore(r.Namespace, r.Results)
	}
	for _, r := range cluster.Items {
		restore("", r.Results)
	}
	return nil
}

// write makes the reports hold the results: a Report per namespace with results, the
// ClusterReport with the rest; a namespace's report with none left is deleted. A result
// unchanged since the last report keeps its timestamp; a decision carries when it was taken.
func (c *Controller) write(ctx context.Context, results []schedaudit.Result, when map[string]time.Time, now time.Time) error {
	byNS := map[string][]schedaudit.Result{}
	for _, r := range results {
		byNS[r.Namespace] = append(byNS[r.Namespace], r)
	}
	counts := map[[2]string]int{}
	for _, r := range results {
		counts[[2]string{r.Policy, string(r.Outcome)}]++
	}
	metrics.SetAuditResults(counts)
	sel := client.MatchingLabels{ManagedByLabel: Source}
	var existing reportsv1alpha1.ReportList
	if err := c.client.List(ctx, &existing, sel); err != nil {
		return err
	}
	for _, r := range existing.Items {
		if _, keep := byNS[r.Namespace]; !keep {
			if err := c.client.Delete(ctx, &r); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		if ns == "" {
			if err := c.writeCluster(ctx, byNS[ns], when, now); err != nil {
				return err
			}
			continue
		}
		if err := c.writeNamespace(ctx, ns, byNS[ns], when, now); err != nil {
			return err
		}
	}
	if _, ok := byNS[""]; !ok {
		return c.writeCluster(ctx, nil, when, now)
	}
	return nil
}

func (c *Controller) writeNamespace(ctx context.Context, ns string, rs []schedaudit.Result, when map[string]time.Time, now time.Time) error {
	r := &reportsv1alpha1.Report{}
	err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ReportName}, r)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	results, summary := toReport(rs, r.Results, when, now)
	if exists && equality.Semantic.DeepEqual(r.Results, results) && r.Summary == summary {
		return nil
	}
	r.Namespace, r.Name = ns, ReportName
	r.Labels = labels(r.Labels)
	r.Source = Source
	r.Scope = &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns}
	r.Results, r.Summary = results, summary
	if !exists {
		err = c.client.Create(ctx, r)
	} else {
		err = c.client.Update(ctx, r)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// The namespace is going, or the report changed under us: the next run writes it.
		return nil
	}
	return err
}

func (c *Controller) writeCluster(ctx context.Context, rs []schedaudit.Result, when map[string]time.Time, now time.Time) error {
	r := &reportsv1alpha1.ClusterReport{}
	err := c.client.Get(ctx, client.ObjectKey{Name: ReportName}, r)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	results, summary := toReport(rs, r.Results, when, now)
	if exists && equality.Semantic.DeepEqual(r.Results, results) && r.Summary == summary {
		return nil
	}
	r.Name = ReportName
	r.Labels = labels(r.Labels)
	r.Source = Source
	r.Results, r.Summary = results, summary
	if !exists {
		err = c.client.Create(ctx, r)
	} else {
		err = c.client.Update(ctx, r)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func labels(l map[string]string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	l[ManagedByLabel] = Source
	return l
}
