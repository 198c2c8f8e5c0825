// Package metrics declares the controllers' Prometheus metrics, with upstream Karpenter's
// names where they exist, registered on controller-runtime's registry (served at /metrics).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

var (
	// NodeClaimsCreated counts NodeClaims created, as upstream: reason "provisioned" for the
	// provisioner and static NodePools, the disruption reason in lower case for replacements.
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_created_total", Help: "Number of NodeClaims created, by reason, NodePool and whether minValues were relaxed.",
	}, []string{"reason", "nodepool", "min_values_relaxed"})
	// NodeClaimsTerminated counts NodeClaims whose instance was terminated.
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_terminated_total", Help: "Number of NodeClaims terminated, by NodePool, capacity type and zone.",
	}, []string{"nodepool", "capacity_type", "zone"})
	// SchedulingDuration is how long one solve took, by controller (provisioner, disruption),
	// with upstream's name, label and buckets.
	SchedulingDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_scheduler_scheduling_duration_seconds", Help: "Duration of scheduling simulations used for provisioning in seconds.",
		Buckets: DurationBuckets,
	}, []string{"controller"})
	// UnschedulablePods is how many pods the last solve could not place, by controller.
	UnschedulablePods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_unschedulable_pods_count", Help: "The number of unschedulable Pods.",
	}, []string{"controller"})
	// NodeClaimsUnhealthyDisrupted counts the NodeClaims node repair replaced or rebooted, by
	// the condition that made them unhealthy (snake case), NodePool, capacity type, image and
	// termination mode, as upstream.
	NodeClaimsUnhealthyDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_unhealthy_disrupted_total", Help: "Number of unhealthy NodeClaims disrupted by node repair, by condition, NodePool, capacity type, image ID and termination mode.",
	}, []string{"condition", "nodepool", "capacity_type", "image_id", "termination_mode"})
	// NodeClaimsDisrupted counts the NodeClaims disruption removed, and PodsDisruptionInitiated
	// the pods they had to move, by reason (lower case), NodePool, capacity type,
	// consolidation policy (snake case, consolidation only) and termination mode (graceful,
	// eventual, forceful: the NodeClaim's terminationGracePeriod), as upstream's.
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_disrupted_total", Help: "NodeClaims disrupted, by reason, NodePool, capacity type, consolidation policy and termination mode.",
	}, disruptedLabels)
	// PodsDisruptionInitiated counts the pods to reschedule on the NodeClaims disruption
	// removed, with NodeClaimsDisrupted's labels.
	PodsDisruptionInitiated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_pods_disruption_initiated_total", Help: "Pods to reschedule on the NodeClaims disrupted (not DaemonSet or mirror pods), by reason, NodePool, capacity type, consolidation policy and termination mode.",
	}, disruptedLabels)
	// NodeReboots counts the reboots node repair carried out, by how they ended (succeeded,
	// provider_error, recovery_timeout), as upstream's karpenter_nodes_reboots_total.
	NodeReboots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_reboots_total", Help: "Node reboots carried out by node repair, by terminal result.",
	}, []string{"result"})
	// NodeRebootDuration is how long a reboot took from its request to its end, by result,
	// with upstream's name and buckets (10 s to 1280 s).
	NodeRebootDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_nodes_reboot_duration_seconds", Help: "Duration of the full reboot action from request to terminal outcome, labeled by result.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 8),
	}, []string{"result"})
	// NodeRebootRecoveryDuration is how long a successful reboot took from its issue until
	// the node was back with a new boot and Ready, as upstream's.
	NodeRebootRecoveryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_nodes_reboot_recovery_duration_seconds", Help: "Time from issuing a reboot until the node proved a new boot and rejoined (bootID changed + Ready). Recorded on successful reboots only.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 8),
	})
	// LaunchBackoffs counts the pods whose workload the provisioner backs off from launching
	// for: its node could not hold the pod beside its DaemonSet and higher-priority pods.
	LaunchBackoffs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "karpenter_provisioner_launch_backoffs_total", Help: "Pods that did not fit on the node launched for them, after which launches for their workload back off.",
	})
	// NodePoolLimit is a NodePool's spec.limits, by resource type, as upstream's.
	NodePoolLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_limit", Help: "A NodePool's limits on the resources its nodes may hold, by resource type.",
	}, []string{"nodepool", "resource_type"})
	// NodePoolCost is what a NodePool's nodes cost per hour, as the solver prices them.
	NodePoolCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_cost_total", Help: "What a NodePool's nodes and NodeClaims cost per hour at the cloud provider's prices, NodeOverlays applied. Not an authoritative source for billing.",
	}, []string{"nodepool"})
	// NodePoolUsage is the resources a NodePool's NodeClaims hold.
	NodePoolUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_usage", Help: "Resources used by a NodePool's NodeClaims, by resource type.",
	}, []string{"nodepool", "resource_type"})

	// PolicyEvaluations counts policy evaluations by decision point and result (allow, deny,
	// warn, dryrun, error).
	PolicyEvaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_policy_evaluations_total", Help: "Policy evaluations, by decision point and result.",
	}, []string{"decision_point", "result"})
	// PolicyEvaluationDuration is the latency of one evaluation of one policy set.
	PolicyEvaluationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_policy_evaluation_duration_seconds", Help: "Latency of one policy evaluation, by decision point.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
	}, []string{"decision_point"})
	// PolicyExceptions counts CapacityExceptions by state (active, expired) and the policy
	// objects they exempt from (kind, name; "*" for every object of the kind).
	PolicyExceptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_policy_exceptions", Help: "CapacityExceptions, by state (active, expired) and the policy they exempt from (kind, name).",
	}, []string{"state", "policy_kind", "policy"})
	// PolicyExemptions counts what CapacityExceptions let through: results dropped and budgets
	// changed, by exception and decision point.
	PolicyExemptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_policy_exemptions_total", Help: "Decisions a CapacityException changed, by exception and decision point.",
	}, []string{"exception", "decision_point"})
	// BudgetHourlyCost is a namespace's attributed run-rate, running and in flight.
	BudgetHourlyCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_hourly_cost_dollars", Help: "A namespace's attributed run-rate, USD per hour, by namespace and state (running, inflight).",
	}, []string{"namespace", "state"})
	// BudgetHourlyLimit is the hourly limit in force of a namespace's CapacityBudget.
	BudgetHourlyLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_hourly_limit_dollars", Help: "The hourly limit in force of a namespace's CapacityBudget, USD per hour.",
	}, []string{"namespace"})
	// BudgetForecastMonthCost is a namespace's spend this month at its current run-rate.
	BudgetForecastMonthCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_forecast_month_cost_dollars", Help: "A namespace's spend this month (UTC) if it runs at its current run-rate to the month's end, USD.",
	}, []string{"namespace"})
	// BudgetLimitUsed is a namespace's run-rate as a share of its hourly limit in force
	// (measure runrate), and its forecast as a share of the month's limit (forecast).
	BudgetLimitUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_limit_used_percent", Help: "A namespace's run-rate as a share of its hourly limit (measure runrate), its forecast as a share of the month's limit (forecast), in percent.",
	}, []string{"namespace", "measure"})
	// BudgetAlertFiring is 1 while a budget's alert threshold is reached, by threshold.
	BudgetAlertFiring = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_alert_firing", Help: "1 while a CapacityBudget's alert threshold (percent) is reached by its run-rate or forecast, else 0.",
	}, []string{"namespace", "percent"})
	// ClusterBudgetHourlyCost is BudgetHourlyCost of a ClusterCapacityBudget: its namespaces'
	// together, by its name; so are the other ClusterBudget* gauges.
	ClusterBudgetHourlyCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_budget_hourly_cost_dollars", Help: "The attributed run-rate of a ClusterCapacityBudget's namespaces together, USD per hour, by state (running, inflight).",
	}, []string{"clustercapacitybudget", "state"})
	// ClusterBudgetHourlyLimit is BudgetHourlyLimit of a ClusterCapacityBudget.
	ClusterBudgetHourlyLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_budget_hourly_limit_dollars", Help: "The hourly limit in force of a ClusterCapacityBudget, USD per hour.",
	}, []string{"clustercapacitybudget"})
	// ClusterBudgetForecastMonthCost is BudgetForecastMonthCost of a ClusterCapacityBudget.
	ClusterBudgetForecastMonthCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_budget_forecast_month_cost_dollars", Help: "A ClusterCapacityBudget's namespaces' spend this month (UTC) if they run at their current run-rate to the month's end, USD.",
	}, []string{"clustercapacitybudget"})
	// ClusterBudgetLimitUsed is BudgetLimitUsed of a ClusterCapacityBudget.
	ClusterBudgetLimitUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_budget_limit_used_percent", Help: "A ClusterCapacityBudget's run-rate as a share of its hourly limit (measure runrate), its forecast as a share of the month's limit (forecast), in percent.",
	}, []string{"clustercapacitybudget", "measure"})
	// ClusterBudgetAlertFiring is BudgetAlertFiring of a ClusterCapacityBudget.
	ClusterBudgetAlertFiring = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_budget_alert_firing", Help: "1 while a ClusterCapacityBudget's alert threshold (percent) is reached by its run-rate or forecast, else 0.",
	}, []string{"clustercapacitybudget", "percent"})
	// BudgetSpotPercent is a namespace's Spot share as its CapacityBudget judges it
	// (policies.SpotBounds.Share; docs/policies.md, "Spot share").
	BudgetSpotPercent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_spot_percent", Help: "A namespace's Spot share: Spot vCPU requested over Spot plus on-demand vCPU above its budget's on-demand base, in percent.",
	}, []string{"namespace"})
	// BudgetSpotRange is the Spot share range of a namespace's CapacityBudget in force, by
	// bound (min, max), in percent: what karpenter_budget_spot_percent is judged against.
	BudgetSpotRange = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_budget_spot_range_percent", Help: "The Spot share range of a namespace's CapacityBudget in force, by bound (min, max), in percent.",
	}, []string{"namespace", "bound"})
	// DisruptionDecisions counts the disruption commands carried out, by decision (delete,
	// replace), reason and consolidation type (empty, single, multi, or "").
	DisruptionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_decisions_total", Help: "Disruption commands carried out, by decision, reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	// DisruptionDecisionsByNodePool counts them by each NodePool whose nodes a command
	// disrupted, as upstream's.
	DisruptionDecisionsByNodePool = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_decisions_by_nodepool_total", Help: "Disruption commands carried out, by NodePool, decision, reason and consolidation type.",
	}, []string{"nodepool", "decision", "reason", "consolidation_type"})
	// DisruptionTerminateFirstDecisions counts the terminate-first commands carried out, by
	// NodePool, reason and why the replacement could not launch first, as upstream's.
	DisruptionTerminateFirstDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_terminate_first_decisions_total",
		Help: "Terminate-first disruption commands carried out, by NodePool, reason, and why the replacement could not be launched first.",
	}, []string{"nodepool", "reason", "terminate_first_reason"})
	// DisruptionQueueFailures counts the replacements of rolled-back commands that never
	// initialized, as upstream's.
	DisruptionQueueFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_queue_failures_total", Help: "Replacements not initialized when their disruption command was rolled back, by decision, reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	// DisruptionEvaluationDuration is how long a method of a pass took to decide, by reason
	// and consolidation type.
	DisruptionEvaluationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_voluntary_disruption_decision_evaluation_duration_seconds", Help: "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
		Buckets: DurationBuckets,
	}, []string{"reason", "consolidation_type"})
	// DisruptionFailedValidations counts the candidates of consolidation commands dropped at
	// validation, by consolidation type.
	DisruptionFailedValidations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_failed_validations_total", Help: "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
	}, []string{"consolidation_type"})
	// DisruptionEligibleNodes is how many nodes each method found eligible in the last pass.
	DisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_voluntary_disruption_eligible_nodes", Help: "Nodes eligible for disruption in the last pass, by reason.",
	}, []string{"reason"})
	// NodePoolAllowedDisruptions is how many of a NodePool's nodes its budgets let be
	// disrupting at once, per reason (upstream's: the budget, not what is left of it).
	NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_allowed_disruptions", Help: "How many of a NodePool's nodes its budgets allow to be disrupting at once now, by reason.",
	}, []string{"nodepool", "reason"})
	// NodePoolNodesConsumingBudgets is how many of a NodePool's nodes count against its
	// budget per reason now: disrupting, or NotReady (except for unhealthy).
	NodePoolNodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_nodes_consuming_budgets", Help: "Nodes of a NodePool counting against its disruption budget now, by reason.",
	}, []string{"nodepool", "reason"})
	// DisruptionPassDuration is how long one disruption pass took: the snapshot, every method
	// until one acted, their simulations (not the validation delay).
	DisruptionPassDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_voluntary_disruption_pass_duration_seconds", Help: "Duration of one disruption pass: snapshot, methods and their simulations.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	// ConsolidationTimeouts counts multi-node consolidation searches cut by their timeout.
	ConsolidationTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_consolidation_timeouts_total", Help: "Consolidation searches that ran out of time, by consolidation type.",
	}, []string{"consolidation_type"})
	// ConsolidationMoves counts the consolidation moves scored, by decision (approved,
	// rejected), NodePool and consolidation policy, as upstream's (every policy's moves;
	// docs/disruption.md, "Balanced").
	ConsolidationMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_consolidation_moves_total", Help: "Consolidation moves scored, by decision (approved, rejected), NodePool and consolidation policy.",
	}, []string{"decision", "nodepool", "policy"})
	// ConsolidationScore is the score of Balanced pools' consolidation moves, with upstream's
	// buckets.
	ConsolidationScore = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_consolidation_score", Help: "Score of Balanced consolidation moves (savings share over disruption share), by decision, NodePool and policy.",
		Buckets: []float64{0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0},
	}, []string{"decision", "nodepool", "policy"})
	// EvictionRequests counts the drain's requests to the Eviction API, by HTTP status code
	// (200 accepted, 429 held by a PodDisruptionBudget, ...), as upstream Karpenter names it.
	EvictionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_pods_eviction_requests_total", Help: "Eviction requests made by the drain, by response code.",
	}, []string{"code"})
	// PodsDeletedForDeadline counts pods the drain deleted, bypassing PodDisruptionBudgets,
	// because their node's terminationGracePeriod was running out.
	PodsDeletedForDeadline = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "karpenter_pods_deleted_for_termination_deadline_total", Help: "Pods deleted (not evicted) so that their node's terminationGracePeriod is kept.",
	})
	// NodesCreated counts nodes registered to their NodeClaims, by NodePool and zone.
	NodesCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_created_total", Help: "Nodes registered to their NodeClaims, by NodePool and zone.",
	}, []string{"nodepool", "zone"})
	// NodesTerminated counts nodes whose termination finished, by NodePool and zone.
	NodesTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_terminated_total", Help: "Nodes whose termination finished (finalizer removed), by NodePool and zone.",
	}, []string{"nodepool", "zone"})
	// NodesDrained counts nodes whose drain finished, by NodePool.
	NodesDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_drained_total", Help: "Nodes drained, by NodePool.",
	}, []string{"nodepool"})
	// InterruptionMessages counts the notices read from a provider's interruption queue, by kind.
	InterruptionMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_interruption_queue_messages_total", Help: "Notices read from the interruption queue, by kind (SpotInterruption, RebalanceRecommendation, StateChange, ScheduledChange, NoOp).",
	}, []string{"kind"})
	// InterruptionMessageErrors counts the queue messages that were not notices (deleted unread).
	InterruptionMessageErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "karpenter_interruption_queue_message_errors_total", Help: "Interruption queue messages that could not be read as a notice; they are deleted.",
	})
	// InstanceTypeOfferingAvailable is whether an offering is available, as upstream's AWS
	// provider exports it, for every provider (controllers/metrics/instancetype, as the three
	// below).
	InstanceTypeOfferingAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cloudprovider_instance_type_offering_available", Help: "Whether an instance type's offering is available (1) or not (0), by instance type, capacity type and zone.",
	}, []string{"instance_type", "capacity_type", "zone"})
	// InstanceTypeOfferingPrice is an offering's price per hour.
	InstanceTypeOfferingPrice = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cloudprovider_instance_type_offering_price_estimate", Help: "An instance type offering's estimated price per hour, in USD, by instance type, capacity type and zone.",
	}, []string{"instance_type", "capacity_type", "zone"})
	// InstanceTypeCPU is an instance type's vCPU.
	InstanceTypeCPU = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cloudprovider_instance_type_cpu_cores", Help: "An instance type's vCPU.",
	}, []string{"instance_type"})
	// InstanceTypeMemory is an instance type's memory in bytes.
	InstanceTypeMemory = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cloudprovider_instance_type_memory_bytes", Help: "An instance type's memory, in bytes.",
	}, []string{"instance_type"})
	// InstanceLaunchFailures counts the offerings a CreateFleet reported an error for, as
	// upstream's AWS provider (providers/aws Observer.LaunchFailure).
	InstanceLaunchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_cloudprovider_instance_launch_failures_total", Help: "Instance launch (CreateFleet offering) failures, by zone, zone ID, capacity type and reason.",
	}, []string{"zone", "zone_id", "capacity_type", "reason"})
	// InstanceTerminationFailures counts the TerminateInstances that failed for an instance
	// still there, as upstream's AWS provider (providers/aws Observer.TerminationFailure).
	InstanceTerminationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_cloudprovider_instance_termination_failures_total", Help: "Instance termination (TerminateInstances) failures, by zone and zone ID.",
	}, []string{"zone", "zone_id"})
	// BatcherBatchTime and BatcherBatchSize observe each batch of the AWS provider's batched
	// EC2 calls, as upstream's: how long its window was open and how many requests it holds.
	BatcherBatchTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_cloudprovider_batcher_batch_time_seconds", Help: "Duration of the batching window, by batcher.", Buckets: DurationBuckets,
	}, []string{"batcher"})
	// BatcherBatchSize is the number of requests in each batch.
	BatcherBatchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_cloudprovider_batcher_batch_size", Help: "Size of the request batch, by batcher.",
		Buckets: []float64{1, 2, 4, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 125, 150, 175, 200, 225, 250, 275, 300, 350, 400, 450, 500, 550, 600, 700, 800, 900, 1000},
	}, []string{"batcher"})
	// EC2NodeClassUserDataBytes is the size of the user data the last launch rendered for an
	// EC2NodeClass, before base64, as upstream's AWS provider; the series goes with the node
	// class's launch templates.
	EC2NodeClassUserDataBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_ec2nodeclasses_userdata_bytes", Help: "Size in bytes of the rendered user data (raw, before base64) for the EC2NodeClass.",
	}, []string{"nodeclass"})
	// InterruptionsReceived counts the interruption notices received, by upstream's message
	// type (cloudprovider.Notice.MessageType; no_op is not counted), as upstream's AWS
	// provider: from the interruption queue, and the kwok provider's Spot notices.
	InterruptionsReceived = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_interruption_received_messages_total", Help: "Interruption notices received, by message type (spot_interrupted, rebalance_recommendation, scheduled_change, instance_stopped, instance_terminated, capacity_reservation_interrupted).",
	}, []string{"message_type"})
	// InstanceStatusUnhealthy counts the instances of NodeClaims a provider's health checks
	// found unhealthy, once per failing check category for as long as it fails, as upstream's
	// AWS provider (interruption.HealthPoller).
	InstanceStatusUnhealthy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_interruption_instance_status_unhealthy_total", Help: "Unique unhealthy instance statuses detected from the cloud's status checks, by category (InstanceStatus, SystemStatus, EventStatus).",
	}, []string{"category"})
	// InterruptionMessagesDeleted counts the messages deleted from the interruption queue
	// (acted on, asking nothing, or unreadable), as upstream's AWS provider.
	InterruptionMessagesDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "karpenter_interruption_deleted_messages_total", Help: "Messages deleted from the interruption queue.",
	})
	// InterruptionMessageLatency observes how long a notice waited, from the cloud's event to
	// its handling, as upstream's AWS provider.
	InterruptionMessageLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_interruption_message_queue_duration_seconds", Help: "Time from an interruption event to its handling, in seconds.",
		Buckets: DurationBuckets,
	})
)

var disruptedLabels = []string{"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"}

// Created counts a NodeClaim created for reason, with its NodePool and whether its
// minValues were relaxed, from its labels and annotations.
func Created(reason string, nc *karpv1.NodeClaim) {
	relaxed := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]
	if relaxed == "" {
		relaxed = "false"
	}
	NodeClaimsCreated.WithLabelValues(reason, nc.Labels[karpv1.NodePoolLabelKey], relaxed).Inc()
}

// Interrupted counts a NodeClaim an interruption notice deleted, as upstream's AWS provider
// does: karpenter_nodeclaims_disrupted_total with the notice's message type as reason, no
// consolidation policy, and the NodeClaim's termination mode.
func Interrupted(nc *karpv1.NodeClaim, messageType string) {
	NodeClaimsDisrupted.WithLabelValues(messageType, nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey], "", TerminationMode(nc)).Inc()
}

// TerminationMode is how a NodeClaim's drain ends, as upstream labels it: graceful (no
// terminationGracePeriod: it waits for PDBs and do-not-disrupt), forceful (a period of 0),
// eventual (pods are deleted when the period runs out).
func TerminationMode(nc *karpv1.NodeClaim) string {
	switch {
	case nc == nil || nc.Spec.TerminationGracePeriod == nil:
		return "graceful"
	case nc.Spec.TerminationGracePeriod.Duration <= 0:
		return "forceful"
	}
	return "eventual"
}

// ProvisionedReason is the reason of NodeClaims created for pending pods or a static
// NodePool's replicas, as upstream's.
const ProvisionedReason = "provisioned"

// DurationBuckets are upstream's histogram buckets for durations, in seconds:
// controller-runtime's, with longer ones for singleton controllers.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}

// Collectors are every metric the manager exports beyond controller-runtime's own, in the
// order docs/metrics.md lists them (a test keeps the two the same).
var Collectors = []prometheus.Collector{NodeClaimsCreated, NodeClaimsTerminated, SchedulingDuration, UnschedulablePods, SchedulerQueueDepth, SchedulerUnfinishedWork, SchedulerIgnoredPods, SchedulerPendingPodsByZone, PodsStartupDuration, NodesAllocatable, NodePoolLimit, NodePoolUsage, NodePoolCost,
	PolicyEvaluations, PolicyEvaluationDuration, policyBlockedPods, PolicyExceptions, PolicyExemptions, auditResults, showbackCosts, BudgetHourlyCost, BudgetHourlyLimit, BudgetForecastMonthCost, BudgetLimitUsed, BudgetAlertFiring, BudgetSpotPercent, BudgetSpotRange,
	ClusterBudgetHourlyCost, ClusterBudgetHourlyLimit, ClusterBudgetForecastMonthCost, ClusterBudgetLimitUsed, ClusterBudgetAlertFiring,
	DisruptionDecisions, DisruptionDecisionsByNodePool, DisruptionTerminateFirstDecisions, DisruptionQueueFailures, DisruptionEvaluationDuration, DisruptionFailedValidations, DisruptionEligibleNodes, NodePoolAllowedDisruptions, NodePoolNodesConsumingBudgets, ConsolidationTimeouts, ConsolidationMoves, ConsolidationScore, InterruptionsReceived, InterruptionMessagesDeleted, InterruptionMessageLatency, InstanceStatusUnhealthy, InterruptionMessages, InterruptionMessageErrors,
	EvictionRequests, PodsDeletedForDeadline, NodesDrained, DisruptionPassDuration, LaunchBackoffs, NodeClaimsUnhealthyDisrupted, NodeClaimsDisrupted, PodsDisruptionInitiated, NodeReboots, NodeRebootDuration, NodeRebootRecoveryDuration,
	NodesCreated, NodesTerminated, CloudProviderDuration, CloudProviderErrors, InstanceTypeOfferingAvailable, InstanceTypeOfferingPrice, InstanceTypeCPU, InstanceTypeMemory, InstanceLaunchFailures, InstanceTerminationFailures, BatcherBatchTime, BatcherBatchSize, EC2NodeClassUserDataBytes, NodesSystemOverhead, NodesPodRequests, NodesPodLimits,
	NodesDaemonRequests, NodesDaemonLimits, NodesCurrentLifetime, ClusterUtilization, PodsState, PodsUnstartedTime, PodsBoundDuration, PodsUnboundTime,
	PodsProvisioningBoundDuration, PodsProvisioningUnboundTime, PodsProvisioningStartupDuration, PodsProvisioningUnstartedTime, PodsSchedulingUndecidedTime, PodsSchedulingDecisionDuration,
	NodesTerminationDuration, NodesLifetimeDuration, NodeClaimsTerminationDuration, NodeClaimsInstanceTerminationDuration, PodsDrained, clusterState}

func init() {
	crmetrics.Registry.MustRegister(Collectors...)
}

// PolicyObserver records the policy engine's evaluations.
type PolicyObserver struct{}

// ObserveEvaluation implements policies.Observer.
func (PolicyObserver) ObserveEvaluation(decisionPoint, result string, d time.Duration) {
	PolicyEvaluations.WithLabelValues(decisionPoint, result).Inc()
	PolicyEvaluationDuration.WithLabelValues(decisionPoint).Observe(d.Seconds())
}

// ObserveExemption implements policies.ExemptionObserver.
func (PolicyObserver) ObserveExemption(decisionPoint string, x policies.Exemption) {
	PolicyExemptions.WithLabelValues(x.Exception, decisionPoint).Inc()
}

// auditResults is karpenter_policy_audit_results: the audit's results in the reports, by
// policy object and outcome, set whole at every run (a policy gone leaves no series).
var auditResults = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "karpenter_policy_audit_results", Help: "The audit's results in its reports, by policy object and outcome (pass, fail, warn, skip, error).",
}, []string{"policy", "outcome"})

// SetAuditResults sets karpenter_policy_audit_results to the counts by (policy, outcome).
func SetAuditResults(counts map[[2]string]int) {
	auditResults.Reset()
	for k, n := range counts {
		auditResults.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
