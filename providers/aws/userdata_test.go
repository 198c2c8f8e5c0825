package aws_test

import (
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/providers/aws"
)

func bootstrap(custom string) aws.Bootstrap {
	return aws.Bootstrap{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", CABundle: "Q0E=",
		Labels: map[string]string{"karpenter.sh/nodepool": "default", "team": "a"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		Kubelet: awsv1.KubeletConfiguration{"maxPods": awsv1.JSONValue("58"), "serializeImagePulls": awsv1.JSONValue("false"),
			"kubeReserved": awsv1.JSONValue(`{"cpu":"100m"}`)},
		Custom: custom}
}

func decode(t *testing.T, family string, b aws.Bootstrap) string {
	t.Helper()
	enc, err := aws.UserData(family, b)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// parts reads a MIME multipart user data document: content type and body of each part.
func parts(t *testing.T, doc string) [][2]string {
	t.Helper()
	header, body, _ := strings.Cut(doc, "\r\n\r\n")
	_, params, err := mime.ParseMediaType(strings.TrimPrefix(strings.Split(header, "\r\n")[1], "Content-Type: "))
	if err != nil {
		t.Fatalf("header %q: %v", header, err)
	}
	r := multipart.NewReader(strings.NewReader(body), params["boundary"])
	var out [][2]string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		out = append(out, [2]string{p.Header.Get("Content-Type"), string(b)})
	}
}

func TestAL2023UserData(t *testing.T) {
	custom := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho hello\n--BOUNDARY--\n"
	ps := parts(t, decode(t, awsv1.AMIFamilyAL2023, bootstrap(custom)))
	if len(ps) != 2 || ps[0][0] != "text/x-shellscript" || strings.TrimSpace(ps[0][1]) != "echo hello" || ps[1][0] != "application/node.eks.aws" {
		t.Fatalf("parts %q: want the node class's script, then the NodeConfig", ps)
	}
	var cfg struct {
		Kind string `json:"kind"`
		Spec struct {
			Cluster struct {
				Name, APIServerEndpoint, CertificateAuthority string
			} `json:"cluster"`
			Kubelet struct {
				Config map[string]any `json:"config"`
				Flags  []string       `json:"flags"`
			} `json:"kubelet"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(ps[1][1]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != "NodeConfig" || cfg.Spec.Cluster.Name != "local" || cfg.Spec.Cluster.APIServerEndpoint != "https://10.0.0.1:6443" || cfg.Spec.Cluster.CertificateAuthority != "Q0E=" {
		t.Errorf("cluster %+v", cfg.Spec.Cluster)
	}
	k := cfg.Spec.Kubelet.Config
	if k["maxPods"] != float64(58) || k["serializeImagePulls"] != false || k["kubeReserved"].(map[string]any)["cpu"] != "100m" {
		t.Errorf("kubelet config %v: want the node class's, as written", k)
	}
	if taints, _ := k["registerWithTaints"].([]any); len(taints) != 2 || taints[0].(map[string]any)["key"] != "dedicated" {
		t.Errorf("registerWithTaints %v", k["registerWithTaints"])
	}
	if len(cfg.Spec.Kubelet.Flags) != 1 || cfg.Spec.Kubelet.Flags[0] != "--node-labels=karpenter.sh/nodepool=default,team=a" {
		t.Errorf("flags %v", cfg.Spec.Kubelet.Flags)
	}
	// A NodeConfig of the node class's own is its own part too.
	ps = parts(t, decode(t, awsv1.AMIFamilyAL2023, bootstrap("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n")))
	if len(ps) != 2 || ps[0][0] != "application/node.eks.aws" {
		t.Errorf("parts %q", ps)
	}
}

func TestAL2AndBottlerocketUserData(t *testing.T) {
	al2 := decode(t, awsv1.AMIFamilyAL2, bootstrap("echo mine"))
	for _, want := range []string{"echo mine\n/etc/eks/bootstrap.sh 'local' --apiserver-endpoint 'https://10.0.0.1:6443' --b64-cluster-ca 'Q0E='",
		"--node-labels=karpenter.sh/nodepool=default,team=a", "--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered=:NoExecute", "--max-pods=58"} {
		if !strings.Contains(al2, want) {
			t.Errorf("AL2 user data lacks %q:\n%s", want, al2)
		}
	}
	br := decode(t, awsv1.AMIFamilyBottlerocket, bootstrap("[settings.host-containers.admin]\nenabled = true"))
	for _, want := range []string{"[settings.host-containers.admin]\nenabled = true\n\n[settings.kubernetes]", "cluster-name = 'local'", "max-pods = 58",
		"'team' = 'a'", "'dedicated' = ['gpu:NoSchedule']"} {
		if !strings.Contains(br, want) {
			t.Errorf("Bottlerocket user data lacks %q:\n%s", want, br)
		}
	}
	if _, err := aws.UserData(awsv1.AMIFamilyWindows2022, bootstrap("")); err == nil {
		t.Error("Windows user data written; this provider does not write it yet")
	}
}
