package main

// The manager's permissions, as controller-gen RBAC markers; `make manifests` writes them to
// config/rbac/role.yaml. Spec and metadata of Git-owned objects (NodePools, node classes,
// policies) are read only: the manager writes their status, and an EC2NodeClass's finalizer
// (patch), which keeps it until the instance profile made for it is deleted. Node status is
// patched only by the kwok provider, which plays the cloud: a terminated instance's node goes
// NotReady, and it creates the CSINodes of the nodes it registers, as their kubelet would.
// TokenReviews and SubjectAccessReviews authenticate and authorize scrapes of the secure
// metrics endpoint (--metrics-secure).
//
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools;nodeclaims;nodeoverlays,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=create;delete;patch;update
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools/status;nodeclaims/status;nodeoverlays/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses,verbs=patch
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses/finalizers,verbs=update
// +kubebuilder:rbac:groups=karpenter.kwok.sh,resources=kwoknodeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.kwok.sh,resources=kwoknodeclasses/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=policy.karpenter.sh,resources=capacitybudgets;clustercapacitybudgets;capacitypolicies;capacityexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.karpenter.sh,resources=capacitybudgets/status;clustercapacitybudgets/status;capacitypolicies/status;capacityexceptions/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=openreports.io,resources=reports;clusterreports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;delete;patch;update
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods;namespaces;persistentvolumes;persistentvolumeclaims;limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// The CapacityBudget gate: the provisioner lifts it from pods, the gate controller labels the
// namespaces the webhook selects.
// +kubebuilder:rbac:groups="",resources=pods;namespaces,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=daemonsets;replicasets;statefulsets;deployments,verbs=get;list;watch
// CapacityBuffers (gate CapacityBuffer): the buffers, their status, and the PodTemplates they
// name.
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csinodes;volumeattachments,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=csinodes,verbs=create
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
//
// Self-signed webhook certificate mode: its Secret, and the caBundle of the webhook
// configuration and the CRDs' conversion webhooks.
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch
