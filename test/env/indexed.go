package env

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/controllers/index"
)

// Indexed is the client with the controllers' cache indexes (package index) answered as the
// manager's cache answers them: a List with one of their fields lists the API server and keeps
// the objects the index gives that value. Controllers under test that look objects up by index
// read through it; the API server alone has no such field selectors.
func Indexed(c client.Client) client.Client { return indexed{Client: c} }

type indexed struct{ client.Client }

func (c indexed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.FieldSelector == nil {
		return c.Client.List(ctx, list, opts...)
	}
	reqs := lo.FieldSelector.Requirements()
	if len(reqs) != 1 {
		return c.Client.List(ctx, list, opts...)
	}
	var extract client.IndexerFunc
	for _, i := range index.Indexes {
		if i.Field == reqs[0].Field {
			extract = i.Extract
		}
	}
	if extract == nil {
		return c.Client.List(ctx, list, opts...)
	}
	lo.FieldSelector = nil
	if err := c.Client.List(ctx, list, lo); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, o := range items {
		if obj, ok := o.(client.Object); ok && slices.Contains(extract(obj), reqs[0].Value) {
			kept = append(kept, o)
		}
	}
	return meta.SetList(list, append([]runtime.Object(nil), kept...))
}
