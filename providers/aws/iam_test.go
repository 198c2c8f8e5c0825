package aws_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheIAMPolicyCoversEveryCall keeps docs/aws.md's IAM policy in step with the code: every
// AWS API the provider calls (a client method or a paginator) must be an action it allows.
func TestTheIAMPolicyCoversEveryCall(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "aws.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json")
	if !ok {
		t.Fatal("docs/aws.md has no IAM policy (a json block)")
	}
	body, _, _ := strings.Cut(rest, "```")
	var policy struct {
		Statement []struct {
			Action any `json:"Action"`
		} `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(body), &policy); err != nil {
		t.Fatalf("the IAM policy in docs/aws.md: %v", err)
	}
	allowed := map[string]bool{}
	for _, st := range policy.Statement {
		switch a := st.Action.(type) {
		case string:
			allowed[a] = true
		case []any:
			for _, x := range a {
				allowed[x.(string)] = true
			}
		}
	}
	service := map[string]string{"EC2": "ec2", "SSM": "ssm", "IAM": "iam", "SQS": "sqs", "Pricing": "pricing"}
	call := regexp.MustCompile(`\.(EC2|SSM|IAM|SQS|Pricing)\.([A-Z][A-Za-z]+)\(`)
	paginator := regexp.MustCompile(`(ec2|ssm|iam|sqs|pricing)\.New([A-Z][A-Za-z]+)Paginator\(`)
	files, _ := filepath.Glob("*.go")
	calls := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			calls++
			if action := service[m[1]] + ":" + m[2]; !allowed[action] {
				t.Errorf("%s calls %s, which the IAM policy in docs/aws.md does not allow", f, action)
			}
		}
		for _, m := range paginator.FindAllStringSubmatch(string(src), -1) {
			calls++
			if action := m[1] + ":" + m[2]; !allowed[action] {
				t.Errorf("%s calls %s, which the IAM policy in docs/aws.md does not allow", f, action)
			}
		}
	}
	if calls < 15 {
		t.Fatalf("found only %d AWS calls in the provider; the scan is broken", calls)
	}
}
