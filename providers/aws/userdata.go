package aws

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
)

// Bootstrap is what a node needs to join the cluster as its NodeClaim asks: the cluster, and
// the labels, taints and kubelet configuration the kubelet registers with.
type Bootstrap struct {
	ClusterName     string
	ClusterEndpoint string
	// CABundle is the cluster's CA certificate, base64 (as EKS's DescribeCluster gives it).
	CABundle string
	Labels   map[string]string
	// Taints are the NodeClaim's taints and startup taints, which the node registers with.
	Taints []corev1.Taint
	// Kubelet is the node class's kubelet configuration, passed on as written.
	Kubelet awsv1.KubeletConfiguration
	// Custom is the node class's spec.userData: merged into the generated user data as each
	// AMI family allows.
	Custom string
}

// UserData is the user data a node of an AMI family boots with (docs/aws.md, "Launch"):
// nodeadm's NodeConfig for AL2023 (a MIME multipart document, the node class's own parts
// first), bootstrap.sh for AL2 (after the node class's script), Bottlerocket's TOML settings
// (after the node class's); base64, as EC2 takes it. Custom is returned as it is.
func UserData(family string, b Bootstrap) (string, error) {
	var out string
	var err error
	switch family {
	case awsv1.AMIFamilyAL2023:
		out, err = nodeadm(b)
	case awsv1.AMIFamilyAL2:
		out = bootstrapScript(b)
	case awsv1.AMIFamilyBottlerocket:
		out, err = bottlerocket(b)
	case awsv1.AMIFamilyCustom:
		out = b.Custom
	default:
		return "", fmt.Errorf("AMI family %s has no user data this provider writes", family)
	}
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString([]byte(out)), nil
}

func labelFlag(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func taintFlag(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		parts = append(parts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	return strings.Join(parts, ",")
}

// nodeadm writes AL2023's MIME multipart user data: the node class's parts, then a NodeConfig
// with the cluster, the kubelet configuration as written plus registerWithTaints, and the
// labels as --node-labels.
func nodeadm(b Bootstrap) (string, error) {
	kubelet := map[string]any{}
	for k, v := range b.Kubelet {
		var val any
		if err := json.Unmarshal(v.Raw, &val); err != nil {
			return "", fmt.Errorf("spec.kubelet.%s: %w", k, err)
		}
		kubelet[k] = val
	}
	if len(b.Taints) > 0 {
		taints := make([]map[string]string, 0, len(b.Taints))
		for _, t := range b.Taints {
			taints = append(taints, map[string]string{"key": t.Key, "value": t.Value, "effect": string(t.Effect)})
		}
		kubelet["registerWithTaints"] = taints
	}
	cluster := map[string]any{"name": b.ClusterName, "apiServerEndpoint": b.ClusterEndpoint}
	if b.CABundle != "" {
		cluster["certificateAuthority"] = b.CABundle
	}
	kubeletSpec := map[string]any{"config": kubelet}
	if len(b.Labels) > 0 {
		kubeletSpec["flags"] = []string{"--node-labels=" + labelFlag(b.Labels)}
	}
	spec := map[string]any{"cluster": cluster, "kubelet": kubeletSpec}
	doc, err := yaml.Marshal(map[string]any{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec})
	if err != nil {
		return "", err
	}
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary("//"); err != nil {
		return "", err
	}
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n")
	if b.Custom != "" {
		if err := customParts(w, b.Custom); err != nil {
			return "", fmt.Errorf("spec.userData: %w", err)
		}
	}
	part, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/node.eks.aws"}})
	if err != nil {
		return "", err
	}
	if _, err := part.Write(doc); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// customParts copies the node class's user data into w: the parts of a MIME multipart
// document, or the whole of anything else as one part (a NodeConfig or a shell script).
func customParts(w *multipart.Writer, custom string) error {
	if strings.HasPrefix(strings.TrimSpace(custom), "MIME-Version:") {
		header, body, _ := strings.Cut(strings.ReplaceAll(custom, "\r\n", "\n"), "\n\n")
		var boundary string
		for _, line := range strings.Split(header, "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Type") {
				_, params, err := mime.ParseMediaType(strings.TrimSpace(value))
				if err != nil {
					return err
				}
				boundary = params["boundary"]
			}
		}
		if boundary == "" {
			return fmt.Errorf("a MIME document without a multipart boundary")
		}
		r := multipart.NewReader(strings.NewReader(body), boundary)
		for {
			p, err := r.NextPart()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			out, err := w.CreatePart(p.Header)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, p); err != nil {
				return err
			}
		}
	}
	contentType := "text/x-shellscript; charset=\"us-ascii\""
	if strings.Contains(custom, "kind: NodeConfig") {
		contentType = "application/node.eks.aws"
	}
	part, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {contentType}})
	if err != nil {
		return err
	}
	_, err = part.Write([]byte(custom))
	return err
}

// bootstrapScript is AL2's: the node class's script, then /etc/eks/bootstrap.sh with the
// labels, taints and max pods as kubelet flags.
func bootstrapScript(b Bootstrap) string {
	var s strings.Builder
	s.WriteString("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	if b.Custom != "" {
		s.WriteString(strings.TrimRight(b.Custom, "\n") + "\n")
	}
	fmt.Fprintf(&s, "/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s'", b.ClusterName, b.ClusterEndpoint)
	if b.CABundle != "" {
		fmt.Fprintf(&s, " --b64-cluster-ca '%s'", b.CABundle)
	}
	var flags []string
	if len(b.Labels) > 0 {
		flags = append(flags, "--node-labels="+labelFlag(b.Labels))
	}
	if len(b.Taints) > 0 {
		flags = append(flags, "--register-with-taints="+taintFlag(b.Taints))
	}
	if raw, ok := b.Kubelet["maxPods"]; ok {
		s.WriteString(" --use-max-pods false")
		flags = append(flags, "--max-pods="+string(raw.Raw))
	}
	fmt.Fprintf(&s, " --kubelet-extra-args '%s'\n", strings.Join(flags, " "))
	return s.String()
}

// bottlerocket is Bottlerocket's TOML settings: the node class's first, then the cluster,
// the labels, the taints and max pods under settings.kubernetes.
func bottlerocket(b Bootstrap) (string, error) {
	var s strings.Builder
	if b.Custom != "" {
		s.WriteString(strings.TrimRight(b.Custom, "\n") + "\n\n")
	}
	q := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "") + "'" }
	s.WriteString("[settings.kubernetes]\n")
	fmt.Fprintf(&s, "api-server = %s\ncluster-name = %s\n", q(b.ClusterEndpoint), q(b.ClusterName))
	if b.CABundle != "" {
		fmt.Fprintf(&s, "cluster-certificate = %s\n", q(b.CABundle))
	}
	if raw, ok := b.Kubelet["maxPods"]; ok {
		fmt.Fprintf(&s, "max-pods = %s\n", string(raw.Raw))
	}
	s.WriteString("\n[settings.kubernetes.node-labels]\n")
	for _, k := range slices.Sorted(maps.Keys(b.Labels)) {
		fmt.Fprintf(&s, "%s = %s\n", q(k), q(b.Labels[k]))
	}
	if len(b.Taints) > 0 {
		byKey := map[string][]string{}
		for _, t := range b.Taints {
			byKey[t.Key] = append(byKey[t.Key], fmt.Sprintf("%s:%s", t.Value, t.Effect))
		}
		s.WriteString("\n[settings.kubernetes.node-taints]\n")
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			vals := make([]string, 0, len(byKey[k]))
			for _, v := range byKey[k] {
				vals = append(vals, q(v))
			}
			fmt.Fprintf(&s, "%s = [%s]\n", q(k), strings.Join(vals, ", "))
		}
	}
	return s.String(), nil
}
