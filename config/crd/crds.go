// Package crd embeds the generated CustomResourceDefinitions (config/crd/bases), so that
// binaries such as karpenterctl validate against exactly the schemas and CEL rules the
// cluster enforces, without a cluster.
package crd

import "embed"

// Bases holds bases/*.yaml, as written by `make manifests`.
//
//go:embed bases/*.yaml
var Bases embed.FS
