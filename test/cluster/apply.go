package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager of objects the local cluster applies.
const FieldManager = "karpenter-local"

// InstallCRDs applies every CRD in dir and waits until each is Established. With webhookURL
// set, conversion webhooks point at webhookURL/convert instead of the in-cluster Service.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir, webhookURL string) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds, err := LocalCRDs(dir, webhookURL)
	if err != nil {
		return err
	}
	for _, u := range crds {
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, u.GetName(), "application/apply-patch+yaml",
			data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", u.GetName(), err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", u.GetName(), err)
		}
	}
	return nil
}

// LocalCRDs reads the CRDs in dir as a local cluster installs them: with webhookURL set, their
// conversion webhooks point at webhookURL/convert instead of the in-cluster Service. No
// caBundle is set: the manager's self-signed mode injects it.
func LocalCRDs(dir, webhookURL string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadObjects(dir)
	if err != nil {
		return nil, err
	}
	var crds []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if webhookURL != "" {
			if _, found, _ := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig"); found {
				if err := unstructured.SetNestedMap(u.Object, map[string]any{"url": webhookURL + "/convert"},
					"spec", "conversion", "webhook", "clientConfig"); err != nil {
					return nil, err
				}
			}
		}
		crds = append(crds, u)
	}
	return crds, nil
}

// WebhookFiles are the repository's webhook configurations: the validating webhooks
// controller-gen writes, and the CapacityBudget gate's mutating webhook.
func WebhookFiles(repoRoot string) []string {
	return []string{filepath.Join(repoRoot, "config", "webhook", "manifests.yaml"), filepath.Join(repoRoot, "config", "webhook", "capacity-budget-gate.yaml")}
}

// InstallWebhooks applies the webhook configurations in paths with every clientConfig pointing
// at webhookURL plus the webhook's path, for a manager running outside the cluster.
func InstallWebhooks(ctx context.Context, cfg *rest.Config, webhookURL string, paths ...string) error {
	for _, path := range paths {
		objs, err := LocalWebhooks(webhookURL, path)
		if err != nil {
			return err
		}
		if err := applyObjects(ctx, cfg, path, objs); err != nil {
			return err
		}
	}
	return nil
}

// LocalWebhooks reads the webhook configurations in paths with every clientConfig pointing at
// webhookURL plus the webhook's path, as InstallWebhooks applies them.
func LocalWebhooks(webhookURL string, paths ...string) ([]*unstructured.Unstructured, error) {
	var all []*unstructured.Unstructured
	for _, path := range paths {
		objs, err := ReadObjects(path)
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	for _, u := range all {
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for i, h := range hooks {
			hook := h.(map[string]any)
			p, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{"url": webhookURL + p}
			hooks[i] = hook
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// Apply server-side applies every object in the given files or directories, in file order.
func Apply(ctx context.Context, cfg *rest.Config, paths ...string) error {
	for _, path := range paths {
		objs, err := ReadObjects(path)
		if err != nil {
			return err
		}
		if err := applyObjects(ctx, cfg, path, objs); err != nil {
			return err
		}
	}
	return nil
}

func applyObjects(ctx context.Context, cfg *rest.Config, path string, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ns := u.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		force := true
		if _, err := ri.Patch(ctx, u.GetName(), "application/apply-patch+yaml", data,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", gvk.Kind, u.GetName(), path, err)
		}
	}

	return nil
}

// ReadObjects reads the Kubernetes objects in a YAML file, or in every .yaml file of a
// directory in name order, skipping kustomization files and empty documents.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = nil
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) && e.Name() != "kustomization.yaml" {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		sort.Strings(files)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufioReader(b))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			m := map[string]any{}
			if err := yaml.Unmarshal(doc, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(m) == 0 {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
