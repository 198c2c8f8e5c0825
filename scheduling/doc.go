// Package scheduling is the vocabulary that cloud providers, cluster state, the solver, the
// policy planner and disruption share about where pods may run: node requirements (label
// keys and the values they may take, intersected as upstream Karpenter does) and resource
// arithmetic on requests and allocatable (PodRequests, Fits, Subtract), what the API server
// adds to a pod's requests when it admits it (Admission, DaemonSetRequests), a node's volume
// attachments against its CSINode limits (Attachments), and Node, a node or in-flight
// NodeClaim with the pods on it. It is pure and small: it imports the API types
// and k8s.io/api only, holds no state, and must never reach for a client, a clock or a
// provider (docs/architecture.md, "Dependency rules").
package scheduling
