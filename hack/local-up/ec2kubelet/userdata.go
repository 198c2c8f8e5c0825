package ec2kubelet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
)

// Boot is what an instance's user data tells its kubelet: the API server to join and the CA
// to trust (base64 PEM, empty if not given), the labels and taints it registers with and its
// configuration.
type Boot struct {
	ClusterEndpoint string
	CABundle        string
	Labels          map[string]string
	Taints          []corev1.Taint
	Kubelet         *kubeletconfigv1beta1.KubeletConfiguration
}

// ParseUserData reads user data (base64, as EC2 returns it) the way each AMI family's boot
// does: nodeadm's NodeConfig parts of a MIME document (AL2023), bootstrap.sh's
// --kubelet-extra-args (AL2), or Bottlerocket's TOML settings.
func ParseUserData(b64 string) (*Boot, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("user data is not base64: %w", err)
	}
	text := string(raw)
	b := &Boot{Labels: map[string]string{}, Kubelet: &kubeletconfigv1beta1.KubeletConfiguration{}}
	switch {
	case strings.HasPrefix(strings.TrimSpace(text), "MIME-Version:"):
		err = b.nodeadm(text)
	case strings.Contains(text, "/etc/eks/bootstrap.sh"):
		err = b.bootstrap(text)
	case strings.Contains(text, "[settings.kubernetes"):
		err = b.bottlerocket(text)
	default:
		return nil, fmt.Errorf("user data is none of nodeadm's MIME document, bootstrap.sh or Bottlerocket's TOML")
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// nodeadm merges the NodeConfig parts in order, as nodeadm does: later kubelet settings win,
// labels and flags add up.
func (b *Boot) nodeadm(text string) error {
	header, body, _ := strings.Cut(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n")
	boundary := ""
	for _, line := range strings.Split(header, "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Type") {
			if _, params, err := mime.ParseMediaType(strings.TrimSpace(value)); err == nil {
				boundary = params["boundary"]
			}
		}
	}
	if boundary == "" {
		return fmt.Errorf("user data: a MIME document without a multipart boundary")
	}
	config := awsv1.KubeletConfiguration{}
	r := multipart.NewReader(strings.NewReader(body), boundary)
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("user data: %w", err)
		}
		if !strings.HasPrefix(p.Header.Get("Content-Type"), "application/node.eks.aws") {
			continue
		}
		doc, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		var nc struct {
			Spec struct {
				Cluster struct {
					APIServerEndpoint    string `json:"apiServerEndpoint"`
					CertificateAuthority string `json:"certificateAuthority"`
				} `json:"cluster"`
				Kubelet struct {
					Config map[string]apiextensionsv1.JSON `json:"config"`
					Flags  []string                        `json:"flags"`
				} `json:"kubelet"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &nc); err != nil {
			return fmt.Errorf("user data: NodeConfig: %w", err)
		}
		if c := nc.Spec.Cluster; c.APIServerEndpoint != "" {
			b.ClusterEndpoint, b.CABundle = c.APIServerEndpoint, c.CertificateAuthority
		}
		for k, v := range nc.Spec.Kubelet.Config {
			config[k] = v
		}
		if err := b.flags(nc.Spec.Kubelet.Flags); err != nil {
			return err
		}
	}
	cfg, err := config.Decode()
	if err != nil {
		return fmt.Errorf("user data: NodeConfig kubelet config: %w", err)
	}
	b.Taints = append(b.Taints, cfg.RegisterWithTaints...)
	b.Kubelet = cfg
	return nil
}

// flags reads the kubelet flags the providers pass: --node-labels, --register-with-taints,
// --max-pods.
func (b *Boot) flags(flags []string) error {
	for _, f := range flags {
		name, value, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		switch name {
		case "node-labels":
			for _, kv := range strings.Split(value, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					b.Labels[k] = v
				}
			}
		case "register-with-taints":
			for _, t := range strings.Split(value, ",") {
				taint, err := parseTaint(t)
				if err != nil {
					return err
				}
				b.Taints = append(b.Taints, taint)
			}
		case "max-pods":
			n, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("user data: --max-pods=%s: %w", value, err)
			}
			b.Kubelet.MaxPods = int32(n)
		}
	}
	return nil
}

// parseTaint reads key=value:Effect (or key:Effect).
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("user data: taint %q has no effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

var (
	extraArgs = regexp.MustCompile(`--kubelet-extra-args '([^']*)'`)
	endpoint  = regexp.MustCompile(`--apiserver-endpoint '([^']*)'`)
	caBundle  = regexp.MustCompile(`--b64-cluster-ca '([^']*)'`)
)

func (b *Boot) bootstrap(text string) error {
	if m := endpoint.FindStringSubmatch(text); m != nil {
		b.ClusterEndpoint = m[1]
	}
	if m := caBundle.FindStringSubmatch(text); m != nil {
		b.CABundle = m[1]
	}
	m := extraArgs.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	return b.flags(strings.Fields(m[1]))
}

// bottlerocket reads the settings.kubernetes tables of Bottlerocket's TOML: max-pods,
// node-labels ('key' = 'value') and node-taints ('key' = ['value:Effect', ...]).
func (b *Boot) bottlerocket(text string) error {
	table := ""
	unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), `'"`) }
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			table = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := unquote(k)
		switch table {
		case "settings.kubernetes":
			switch key {
			case "api-server":
				b.ClusterEndpoint = unquote(v)
			case "cluster-certificate":
				b.CABundle = unquote(v)
			}
			if key == "max-pods" {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return fmt.Errorf("user data: max-pods = %s: %w", v, err)
				}
				b.Kubelet.MaxPods = int32(n)
			}
		case "settings.kubernetes.node-labels":
			b.Labels[key] = unquote(v)
		case "settings.kubernetes.node-taints":
			var values []string
			if err := json.Unmarshal([]byte(strings.ReplaceAll(v, "'", `"`)), &values); err != nil {
				return fmt.Errorf("user data: node-taints %s: %w", key, err)
			}
			for _, val := range values {
				taint, err := parseTaint(key + "=" + val)
				if err != nil {
					return err
				}
				b.Taints = append(b.Taints, taint)
			}
		}
	}
	return nil
}
