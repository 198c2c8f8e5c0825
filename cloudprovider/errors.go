package cloudprovider

import (
	"errors"
	"fmt"
)

// NodeClaimNotFoundError means the NodeClaim's instance does not exist (any more).
type NodeClaimNotFoundError struct{ err error }

// NewNodeClaimNotFoundError wraps err.
func NewNodeClaimNotFoundError(err error) *NodeClaimNotFoundError {
	return &NodeClaimNotFoundError{err: err}
}

func (e *NodeClaimNotFoundError) Error() string { return fmt.Sprintf("nodeclaim not found, %s", e.err) }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.err }

// IsNodeClaimNotFoundError reports whether err is, or wraps, a NodeClaimNotFoundError.
func IsNodeClaimNotFoundError(err error) bool {
	var e *NodeClaimNotFoundError
	return errors.As(err, &e)
}

// InsufficientCapacityError means no offering of the NodeClaim's instance types had capacity.
// The offerings that failed are unavailable for a while; the provisioner tries others.
type InsufficientCapacityError struct{ err error }

// NewInsufficientCapacityError wraps err.
func NewInsufficientCapacityError(err error) *InsufficientCapacityError {
	return &InsufficientCapacityError{err: err}
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity, %s", e.err)
}
func (e *InsufficientCapacityError) Unwrap() error { return e.err }

// IsInsufficientCapacityError reports whether err is, or wraps, an InsufficientCapacityError.
func IsInsufficientCapacityError(err error) bool {
	var e *InsufficientCapacityError
	return errors.As(err, &e)
}

// NodeClassNotReadyError means the NodeClaim's node class cannot be used to launch yet.
type NodeClassNotReadyError struct{ err error }

// NewNodeClassNotReadyError wraps err.
func NewNodeClassNotReadyError(err error) *NodeClassNotReadyError {
	return &NodeClassNotReadyError{err: err}
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("node class not ready, %s", e.err)
}
func (e *NodeClassNotReadyError) Unwrap() error { return e.err }

// IsNodeClassNotReadyError reports whether err is, or wraps, a NodeClassNotReadyError.
func IsNodeClassNotReadyError(err error) bool {
	var e *NodeClassNotReadyError
	return errors.As(err, &e)
}
