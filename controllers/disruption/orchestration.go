package disruption

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// What a command writes on the objects, so that a restarted or newly elected manager knows
// what is in flight (docs/disruption.md, "Commands in flight"):
//   - each candidate's Node: the karpenter.sh/disrupted:NoSchedule taint;
//   - each candidate's NodeClaim (or its Node, without one): CommandAnnotation, the command's
//     ID, ReplacementsAnnotation, how many replacements it launches, DrainBoundAnnotation,
//     repair's bound on its drain (when it sets one), and the DisruptionReason condition
//     (reason: the method's);
//   - each replacement NodeClaim: CommandLabel, the command's ID.
const (
	CommandAnnotation      = karpv1.Group + "/disruption-command"
	ReplacementsAnnotation = karpv1.Group + "/disruption-replacements"
	DrainBoundAnnotation   = karpv1.Group + "/disruption-drain-bound"
	CommandLabel           = karpv1.Group + "/disruption-command"
)

// ReplacementTimeout bounds how long a command waits for its replacements to initialize
// before it rolls back.
const ReplacementTimeout = 5 * time.Minute

// RollbackHold is how long graceful disruption leaves a node alone after a command on it
// rolled back because its replacements did not initialize within ReplacementTimeout.
const RollbackHold = 5 * time.Minute

// OrchestrationBackoff is how a command is looked at again when no event of its objects
// brings it back: after 1 s, then 2 s, ... at most every 10 s.
var OrchestrationBackoff = ratelimit.Settings{Base: time.Second, Max: 10 * time.Second, QPS: 20, Burst: 200}

// Orchestrator carries commands out, several at once, each as a reconciler over its objects:
// mark the candidates, create the replacements and nominate the pods that go to them, wait
// until every replacement is Initialized, then delete the candidates (their termination
// drains them). A replacement that fails to launch or initialize within ReplacementTimeout
// rolls the command back: the candidates are unmarked and the replacements that exist released
// (rollback). It is the only part of disruption that writes.
type Orchestrator struct {
	client   client.Client
	cluster  *state.Cluster
	recorder events.EventRecorder
	clock    clock.Clock
	source   chan event.TypedGenericEvent[*karpv1.NodeClaim]

	mu       sync.Mutex
	commands map[string]*command
	// held are the nodes of commands rolled back because their replacements never
	// initialized: graceful disruption leaves them alone until then (methods.Cluster.Hold).
	held map[string]methods.Held
	// reboots are the reboots committed, when the cloud provider reboots (nil otherwise).
	reboots *RebootHistory
}

// command is a command in flight.
type command struct {
	id       string
	reason   methods.Reason
	decision methods.Decision
	// consolidationType and savings are for metrics and events.
	consolidationType string
	savings           float64
	// candidates name each candidate's node and NodeClaim ("" without one).
	candidates []candidateRef
	// planned are the replacements still to create (a new command's); created names those
	// created; want is how many it launches in all.
	planned []*solver.NodeClaim
	created []string
	want    int
	// moves are where the candidates' pods go, by replacement hostname, to nominate them.
	moves   []methods.Move
	pools   map[string]*karpv1.NodePool
	started time.Time
	marked  bool
	// waitingTold: the replacements were told DisruptionWaitingReadiness once.
	waitingTold bool
	// condition is the node condition repair acts on ("" for other reasons, and for a repair
	// adopted after a restart); rebootDrain the drain's bound of a reboot, drainBound repair's
	// bound on the drain once the candidates go (nil: their terminationGracePeriod).
	condition               string
	rebootDrain, drainBound *time.Duration
	// terminateFirst says why a delete command's candidates go before any replacement
	// (methods.Command.TerminateFirst); "" otherwise.
	terminateFirst string
}

// candidateRef names a candidate's node and NodeClaim, with what the metrics label it by: its
// NodePool, capacity type, image, consolidation policy (consolidation only), termination
// mode, and how many pods it had to move.
type candidateRef struct {
	node, nodeClaim, nodePool, capacityType, imageID string
	consolidationPolicy, terminationMode             string
	pods                                             int
}

// NewOrchestrator returns the orchestrator; Register it with the manager.
func NewOrchestrator(c client.Client, cluster *state.Cluster, recorder events.EventRecorder, clk clock.Clock) *Orchestrator {
	return &Orchestrator{client: c, cluster: cluster, recorder: recorder, clock: clk, commands: map[string]*command{},
		source: make(chan event.TypedGenericEvent[*karpv1.NodeClaim], 1000)}
}

// Register adds the orchestrator's controller: it runs on the leader only, reconciling each
// command by ID when the orchestrator hands it over and when its replacements change.
func (o *Orchestrator) Register(mgr ctrl.Manager) error {
	byCommand := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if id := obj.GetLabels()[CommandLabel]; id != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: id}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("disruption.orchestration").
		WithOptions(ratelimit.OptionsWith(10, OrchestrationBackoff)).
		WatchesRawSource(source.Channel(o.source, handler.TypedFuncs[*karpv1.NodeClaim, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*karpv1.NodeClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: e.Object.Name}})
			},
		})).
		Watches(&karpv1.NodeClaim{}, byCommand, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			return obj.GetLabels()[CommandLabel] != ""
		}))).
		Complete(o)
}

// hold keeps graceful disruption off a rolled-back command's nodes for RollbackHold: its
// replacements never initialized, and a new command at once would launch another that likely
// fails the same way, with the node tainted again before anyone sees it untainted.
func (o *Orchestrator) hold(cmd *command, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held == nil {
		o.held = map[string]methods.Held{}
	}
	until := o.clock.Now().Add(RollbackHold)
	for _, c := range cmd.candidates {
		o.held[c.node] = methods.Held{Until: until, Why: fmt.Sprintf("a %s command on it rolled back: %s", strings.ToLower(string(cmd.reason)), why)}
	}
}

// Held are the nodes graceful disruption leaves alone for now (hold); holds that ended are
// forgotten.
func (o *Orchestrator) Held() map[string]methods.Held {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	out := map[string]methods.Held{}
	for node, h := range o.held {
		if !h.Until.After(now) {
			delete(o.held, node)
			continue
		}
		out[node] = h
	}
	return out
}

// InFlight names the nodes of the commands in flight: a pass counts them as disrupting
// before their taint shows in the model.
func (o *Orchestrator) InFlight() map[string]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]bool{}
	for _, cmd := range o.commands {
		for _, c := range cmd.candidates {
			out[c.node] = true
		}
	}
	return out
}

// Len is how many commands are in flight.
func (o *Orchestrator) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.commands)
}

// Add hands a command over and returns its ID; the orchestrator carries it out.
func (o *Orchestrator) Add(c *methods.Cluster, cmd *methods.Command) string {
	in := &command{id: "d-" + utilrand.String(8), reason: cmd.Reason, decision: cmd.Decision, consolidationType: cmd.ConsolidationType,
		savings: cmd.Savings(), planned: cmd.Replacements, want: len(cmd.Replacements), moves: cmd.Moves, pools: map[string]*karpv1.NodePool{},
		started: o.clock.Now(), condition: cmd.Condition, rebootDrain: cmd.RebootDrain,
		drainBound: cmd.DrainBound, terminateFirst: cmd.TerminateFirst}
	for _, cand := range cmd.Candidates {
		ref := candidateRef{node: cand.Name(), nodePool: cand.NodePool.Name, capacityType: cand.CapacityType,
			terminationMode: terminationMode(cand.NodeClaim, cmd.DrainBound), pods: len(cand.Pods)}
		if cand.NodeClaim != nil {
			ref.imageID = cand.NodeClaim.Status.ImageID
		}
		if cmd.ConsolidationType != "" {
			ref.consolidationPolicy = snakeCase(string(cand.NodePool.Spec.Disruption.ConsolidationPolicy))
		}
		if cand.NodeClaim != nil {
			ref.nodeClaim = cand.NodeClaim.Name
		}
		in.candidates = append(in.candidates, ref)
	}
	for _, r := range cmd.Replacements {
		in.pools[r.NodePool] = c.NodePools[r.NodePool].NodePool
	}
	o.mu.Lock()
	o.commands[in.id] = in
	o.mu.Unlock()
	o.source <- event.TypedGenericEvent[*karpv1.NodeClaim]{Object: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: in.id}}}
	return in.id
}

// Reconcile takes a command one step further.
func (o *Orchestrator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o.mu.Lock()
	cmd := o.commands[req.Name]
	o.mu.Unlock()
	if cmd == nil {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("command", cmd.id, "reason", cmd.reason, "decision", cmd.decision)
	ctx = log.IntoContext(ctx, logger)
	if cmd.decision == methods.DecisionReboot {
		// Nothing is marked, launched or removed: the reboot controller takes it from here.
		if err := o.reboot(ctx, cmd); err != nil {
			return ratelimit.Retry(err)
		}
		recordDecision(cmd)
		o.forget(cmd)
		return reconcile.Result{}, nil
	}
	if !cmd.marked {
		for _, c := range cmd.candidates {
			if err := o.mark(ctx, cmd, c); err != nil {
				if apierrors.IsNotFound(err) {
					return reconcile.Result{}, o.rollback(ctx, cmd, fmt.Sprintf("node %s is gone", c.node), false)
				}
				return ratelimit.Retry(err)
			}
		}
		cmd.marked = true
	}
	for len(cmd.planned) > 0 {
		r := cmd.planned[0]
		nc := solver.NodeClaimFor(cmd.pools[r.NodePool], r)
		nc.Labels[CommandLabel] = cmd.id
		if err := o.client.Create(ctx, nc); err != nil {
			return reconcile.Result{}, o.rollback(ctx, cmd, fmt.Sprintf("creating a replacement: %v", err), false)
		}
		o.cluster.Created(nc)
		metrics.Created(strings.ToLower(string(cmd.reason)), nc)
		// As upstream's: the replacement says what it was launched for.
		o.recorder.Eventf(nc, nil, corev1.EventTypeNormal, "DisruptionLaunching", "Disruption", "Launching NodeClaim: %s", cmd.reason)
		for _, m := range cmd.moves {
			if m.To == r.Hostname {
				o.cluster.Nominations().Nominate(m.Pod, nc.Name)
			}
		}
		cmd.created = append(cmd.created, nc.Name)
		cmd.planned = cmd.planned[1:]
		if len(cmd.planned) == 0 {
			logger.Info("launching replacements", "nodes", cmd.nodes(), "replacements", cmd.created)
		}
	}
	ready, why, err := o.replacementsReady(ctx, cmd)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case why != "":
		return reconcile.Result{}, o.rollback(ctx, cmd, why, true)
	case !ready && o.clock.Since(cmd.started) > ReplacementTimeout:
		why := fmt.Sprintf("replacements did not initialize within %s", ReplacementTimeout)
		o.hold(cmd, why)
		return reconcile.Result{}, o.rollback(ctx, cmd, why, true)
	case !ready:
		if !cmd.waitingTold {
			cmd.waitingTold = true
			for _, name := range cmd.created {
				o.recorder.Eventf(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil, corev1.EventTypeNormal, "DisruptionWaitingReadiness", "Disruption",
					"Waiting on readiness to continue disruption")
			}
		}
		// Their updates bring us back; the backoff is the fallback, and the timeout's clock.
		return ratelimit.Again(), nil
	}
	for _, c := range cmd.candidates {
		if cmd.drainBound != nil {
			// Repair bounds the drain: counted from now, once the replacements are up, so that
			// their launch does not eat into it.
			if err := o.tightenDeadline(ctx, c, o.clock.Now().Add(*cmd.drainBound)); err != nil {
				return ratelimit.Retry(err)
			}
		}
		if cmd.reason == methods.ReasonUnhealthy {
			metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues(snakeCase(cmd.condition), c.nodePool, c.capacityType, c.imageID, c.terminationMode).Inc()
		}
		if err := o.remove(ctx, c); err != nil {
			return ratelimit.Retry(err)
		}
		disrupted(cmd, c)
		o.event(c, corev1.EventTypeNormal, "DisruptionTerminating", fmt.Sprintf("Disrupting node: %s (%s, saving $%.4f/hour)", cmd.reason, cmd.decision, cmd.savings))
	}
	recordDecision(cmd)
	logger.Info("disrupted", "nodes", cmd.nodes(), "savingsPerHour", cmd.savings, "seconds", o.clock.Since(cmd.started).Seconds())
	o.forget(cmd)
	return reconcile.Result{}, nil
}

func (cmd *command) nodes() []string {
	out := make([]string, 0, len(cmd.candidates))
	for _, c := range cmd.candidates {
		out = append(out, c.node)
	}
	return out
}

func (o *Orchestrator) forget(cmd *command) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.commands, cmd.id)
}

// mark taints the candidate's node and records the command on its NodeClaim (or node).
func (o *Orchestrator) mark(ctx context.Context, cmd *command, c candidateRef) error {
	node := &corev1.Node{}
	if err := o.client.Get(ctx, client.ObjectKey{Name: c.node}, node); err != nil {
		return err
	}
	if node.DeletionTimestamp != nil {
		return apierrors.NewNotFound(corev1.Resource("nodes"), c.node)
	}
	// The command goes on the NodeClaim before the taint goes on the node: a tainted node is
	// always one a command accounts for (a manager that stops between the two leaves a marked
	// NodeClaim, which the next one adopts or rolls back; never an orphaned taint).
	if c.nodeClaim != "" {
		nc := &karpv1.NodeClaim{}
		if err := o.client.Get(ctx, client.ObjectKey{Name: c.nodeClaim}, nc); err != nil {
			return err
		}
		if nc.DeletionTimestamp != nil {
			return apierrors.NewNotFound(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), c.nodeClaim)
		}
		claimBase := nc.DeepCopy()
		setCommand(nc, cmd)
		if !equality.Semantic.DeepEqual(claimBase, nc) {
			if err := o.client.Patch(ctx, nc, client.MergeFrom(claimBase)); err != nil {
				return fmt.Errorf("recording the command on nodeclaim %s: %w", nc.Name, err)
			}
		}
		claimBase = nc.DeepCopy()
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
			Reason: string(cmd.reason), Message: fmt.Sprintf("disrupted by command %s (%s)", cmd.id, cmd.decision), ObservedGeneration: nc.Generation})
		// With the resourceVersion read: the condition list is replaced whole.
		if err := o.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(claimBase, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("setting the disruption reason of nodeclaim %s: %w", nc.Name, err)
		}
	}
	base := node.DeepCopy()
	if !hasTaint(node, karpv1.DisruptedTaintKey) {
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	}
	if c.nodeClaim == "" {
		setCommand(node, cmd)
	}
	if !equality.Semantic.DeepEqual(base, node) {
		// With the resourceVersion read: the taint list is replaced whole.
		if err := o.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("tainting node %s: %w", node.Name, err)
		}
	}
	return nil
}

func setCommand(obj client.Object, cmd *command) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[CommandAnnotation] = cmd.id
	a[ReplacementsAnnotation] = strconv.Itoa(cmd.want)
	if cmd.drainBound != nil {
		a[DrainBoundAnnotation] = cmd.drainBound.String()
	}
	obj.SetAnnotations(a)
}

// replacementsReady reports whether every replacement is Initialized; why says the command
// must roll back (a replacement deleted: its launch failed).
func (o *Orchestrator) replacementsReady(ctx context.Context, cmd *command) (bool, string, error) {
	ready := true
	for _, name := range cmd.created {
		nc := &karpv1.NodeClaim{}
		if err := o.client.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if !apierrors.IsNotFound(err) {
				return false, "", err
			}
			// The cache may not show one created a moment ago; a replacement missing after
			// that was deleted (its launch failed).
			if o.clock.Since(cmd.started) > cacheGrace {
				return false, fmt.Sprintf("replacement %s was deleted (launch failed)", name), nil
			}
			ready = false
			continue
		}
		if nc.DeletionTimestamp != nil {
			return false, fmt.Sprintf("replacement %s is being deleted", name), nil
		}
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			ready = false
		}
	}
	return ready, "", nil
}

// cacheGrace is how long a replacement just created may be missing from the cache before the
// command takes it for deleted.
const cacheGrace = 30 * time.Second

// remove deletes the candidate's NodeClaim, or its Node when it has none.
func (o *Orchestrator) remove(ctx context.Context, c candidateRef) error {
	var obj client.Object = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.node}}
	if c.nodeClaim != "" {
		obj = &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: c.nodeClaim}}
	}
	if err := o.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
	}
	return nil
}

// tightenDeadline sets the candidate's NodeClaim's termination deadline (the annotation the
// drain deletes pods by) to at, unless an earlier one is set: a bound tightens, never extends.
func (o *Orchestrator) tightenDeadline(ctx context.Context, c candidateRef, at time.Time) error {
	if c.nodeClaim == "" {
		return nil
	}
	nc := &karpv1.NodeClaim{}
	if err := o.client.Get(ctx, client.ObjectKey{Name: c.nodeClaim}, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if set, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		if t, err := time.Parse(time.RFC3339, set); err == nil && !t.After(at) {
			return nil
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = at.UTC().Format(time.RFC3339)
	if err := o.client.Patch(ctx, nc, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// recordDecision counts a command carried out, in all and by each NodePool it disrupted.
func recordDecision(cmd *command) {
	reason := strings.ToLower(string(cmd.reason))
	decision := string(cmd.decision)
	if cmd.terminateFirst != "" {
		// Upstream's decision label for a delete-only command that terminates first.
		decision = methods.TerminateFirstDecision
	}
	metrics.DisruptionDecisions.WithLabelValues(decision, reason, cmd.consolidationType).Inc()
	seen := map[string]bool{}
	for _, c := range cmd.candidates {
		if c.nodePool != "" && !seen[c.nodePool] {
			seen[c.nodePool] = true
			metrics.DisruptionDecisionsByNodePool.WithLabelValues(c.nodePool, decision, reason, cmd.consolidationType).Inc()
			if cmd.terminateFirst != "" {
				metrics.DisruptionTerminateFirstDecisions.WithLabelValues(c.nodePool, reason, cmd.terminateFirst).Inc()
			}
		}
	}
}

// rollback unmarks the candidates. With release (the command got under way: its replacements
// timed out or one of them failed), the replacements that exist are released as ordinary
// NodeClaims, as upstream keeps them: they launched and may yet initialize, and once they have,
// consolidation treats them as any node; until then no command counts on their room
// (scheduling/methods, simulate). Without (it never got under way: creating a replacement
// failed, or the manager that started it stopped first), those not initialized are deleted,
// as nothing waits for them. It runs with a context of its own: a rollback started must finish
// even when the manager stops.
func (o *Orchestrator) rollback(ctx context.Context, cmd *command, why string, release bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	log.FromContext(ctx).Info("rolling back a disruption command", "nodes", cmd.nodes(), "why", why, "replacementsKept", release)
	var errs []string
	for _, c := range cmd.candidates {
		if err := o.unmark(ctx, c.node, c.nodeClaim); err != nil {
			errs = append(errs, err.Error())
		}
		o.event(c, corev1.EventTypeWarning, "DisruptionRolledBack", fmt.Sprintf("%s: %s", cmd.reason, why))
	}
	initialized := 0
	for _, name := range cmd.created {
		nc := &karpv1.NodeClaim{}
		if err := o.client.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err.Error())
			}
			continue
		}
		up := meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)
		if up {
			initialized++
		}
		switch {
		case release || up:
			// No longer the command's: a manager that starts later must not take it for
			// one in flight (Adopt).
			if err := o.release(ctx, nc); err != nil {
				errs = append(errs, err.Error())
			}
		default:
			if err := o.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		// Tried again through the limiter; the command stays in flight until it is undone.
		return fmt.Errorf("rolling back command %s: %s", cmd.id, strings.Join(errs, "; "))
	}
	// The replacements it wanted that never initialized (not created, gone, or deleted here).
	metrics.DisruptionQueueFailures.WithLabelValues(string(cmd.decision), strings.ToLower(string(cmd.reason)), cmd.consolidationType).Add(float64(max(0, cmd.want-initialized)))
	o.forget(cmd)
	return nil
}

// release removes a replacement's CommandLabel.
func (o *Orchestrator) release(ctx context.Context, nc *karpv1.NodeClaim) error {
	if nc.Labels[CommandLabel] == "" || nc.DeletionTimestamp != nil {
		return nil
	}
	base := nc.DeepCopy()
	delete(nc.Labels, CommandLabel)
	if err := o.client.Patch(ctx, nc, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing replacement %s: %w", nc.Name, err)
	}
	return nil
}

// unmark removes the disrupted taint from a node, and the command and DisruptionReason from
// its NodeClaim (or node).
func (o *Orchestrator) unmark(ctx context.Context, nodeName, claimName string) error {
	node := &corev1.Node{}
	if err := o.client.Get(ctx, client.ObjectKey{Name: nodeName}, node); client.IgnoreNotFound(err) != nil {
		return err
	} else if err == nil && node.DeletionTimestamp == nil {
		base := node.DeepCopy()
		var kept []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != karpv1.DisruptedTaintKey {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
		clearCommand(node)
		if !equality.Semantic.DeepEqual(base, node) {
			if err := o.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("untainting node %s: %w", node.Name, err)
			}
		}
	}
	if claimName == "" {
		return nil
	}
	nc := &karpv1.NodeClaim{}
	if err := o.client.Get(ctx, client.ObjectKey{Name: claimName}, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	base := nc.DeepCopy()
	clearCommand(nc)
	if !equality.Semantic.DeepEqual(base, nc) {
		if err := o.client.Patch(ctx, nc, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
		return nil
	}
	base = nc.DeepCopy()
	meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
	return client.IgnoreNotFound(o.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

func clearCommand(obj client.Object) {
	a := obj.GetAnnotations()
	if _, ok := a[CommandAnnotation]; !ok {
		return
	}
	delete(a, CommandAnnotation)
	delete(a, ReplacementsAnnotation)
	delete(a, DrainBoundAnnotation)
	obj.SetAnnotations(a)
}

func (o *Orchestrator) event(c candidateRef, kind, reason, msg string) {
	if c.nodeClaim != "" {
		o.recorder.Eventf(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: c.nodeClaim}}, nil, kind, reason, "Disruption", "%s", msg)
	}
	o.recorder.Eventf(nodeObject(o.client, c.node), nil, kind, reason, "Disruption", "%s", msg)
}

// Adopt takes over what a manager that stopped left in flight, from the objects: a command
// whose replacements were all created is tracked again to its end (from now, with a fresh
// ReplacementTimeout); any other is rolled back (its replacements not initialized deleted,
// the others released, its candidates unmarked), and so is a disrupted taint no command accounts for, on a node
// that is not being deleted. The next pass decides afresh.
func (o *Orchestrator) Adopt(ctx context.Context, objs *snapshot.Objects) error {
	found := map[string]*command{}
	get := func(id string) *command {
		if found[id] == nil {
			found[id] = &command{id: id, want: -1, started: o.clock.Now(), marked: true, pools: map[string]*karpv1.NodePool{}}
		}
		return found[id]
	}
	claimOf := map[string]*karpv1.NodeClaim{}
	for _, nc := range objs.NodeClaims {
		if nc.Status.NodeName != "" {
			claimOf[nc.Status.NodeName] = nc
		}
		if id := nc.Labels[CommandLabel]; id != "" && nc.DeletionTimestamp == nil {
			cmd := get(id)
			cmd.created = append(cmd.created, nc.Name)
		}
		if id := nc.Annotations[CommandAnnotation]; id != "" && nc.DeletionTimestamp == nil {
			cmd := get(id)
			cmd.candidates = append(cmd.candidates, candidateRef{node: nc.Status.NodeName, nodeClaim: nc.Name})
			cmd.want, _ = strconv.Atoi(nc.Annotations[ReplacementsAnnotation])
			if d, err := time.ParseDuration(nc.Annotations[DrainBoundAnnotation]); err == nil {
				cmd.drainBound = &d
			}
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); cond != nil {
				cmd.reason = methods.Reason(cond.Reason)
			}
		}
	}
	accounted := map[string]bool{}
	for _, n := range objs.Nodes {
		if id := n.Annotations[CommandAnnotation]; id != "" && n.DeletionTimestamp == nil && claimOf[n.Name] == nil {
			cmd := get(id)
			cmd.candidates = append(cmd.candidates, candidateRef{node: n.Name})
			cmd.want, _ = strconv.Atoi(n.Annotations[ReplacementsAnnotation])
		}
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	logger := log.FromContext(ctx)
	for _, id := range ids {
		cmd := found[id]
		for _, c := range cmd.candidates {
			accounted[c.node] = true
		}
		if len(cmd.candidates) > 0 && cmd.want > 0 && len(cmd.created) == cmd.want {
			cmd.decision = methods.DecisionReplace
			logger.Info("adopting a disruption command in flight", "command", id, "nodes", cmd.nodes(), "replacements", cmd.created)
			o.mu.Lock()
			o.commands[id] = cmd
			o.mu.Unlock()
			o.source <- event.TypedGenericEvent[*karpv1.NodeClaim]{Object: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: id}}}
			continue
		}
		if err := o.rollback(ctx, cmd, "the manager that started it stopped before it was under way", false); err != nil {
			return err
		}
	}
	for _, n := range objs.Nodes {
		if accounted[n.Name] || n.DeletionTimestamp != nil || !hasTaint(n, karpv1.DisruptedTaintKey) {
			continue
		}
		if nc := claimOf[n.Name]; nc != nil && nc.DeletionTimestamp != nil {
			continue // its termination tainted it
		}
		if err := o.unmark(ctx, n.Name, ""); err != nil {
			return err
		}
		logger.Info("removed a disruption taint no command accounts for", "Node", n.Name)
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
