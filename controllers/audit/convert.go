package audit

import (
	"fmt"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedaudit "github.com/karpenter-policy/karpenter/scheduling/audit"
)

// toReport turns results into a report's results and summary. A result the previous report
// holds with the same outcome and message keeps its timestamp; a decision carries when it was
// taken; the others are stamped now. Past maxResults, one skip result counts what was left out.
func toReport(rs []schedaudit.Result, previous []reportsv1alpha1.ReportResult, when map[string]time.Time, now time.Time) ([]reportsv1alpha1.ReportResult, reportsv1alpha1.ReportSummary) {
	stamps := map[string]metav1.Timestamp{}
	for _, p := range previous {
		stamps[stampKey(p)] = p.Timestamp
	}
	out := make([]reportsv1alpha1.ReportResult, 0, min(len(rs), maxResults+1))
	var summary reportsv1alpha1.ReportSummary
	for i, r := range rs {
		if i == maxResults {
			out = append(out, reportsv1alpha1.ReportResult{Source: Source, Policy: Source, Rule: "truncated", Result: reportsv1alpha1.Result(schedaudit.Skip),
				Severity: reportsv1alpha1.ResultSeverity(schedaudit.Info), Timestamp: stamp(now),
				Description: fmt.Sprintf("%d more results left out: a report holds at most %d", len(rs)-maxResults, maxResults)})
			summary.Skip++
			break
		}
		rr := reportsv1alpha1.ReportResult{Source: Source, Policy: r.Policy, Rule: r.Rule, Category: category(r), Severity: reportsv1alpha1.ResultSeverity(r.Severity),
			Result: reportsv1alpha1.Result(r.Outcome), Scored: true, Description: r.Message, Properties: r.Properties}
		for _, s := range r.Subjects {
			rr.Subjects = append(rr.Subjects, corev1.ObjectReference{APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name})
		}
		switch at, decided := when[r.Key()]; {
		case decided:
			rr.Timestamp = stamp(at)
		default:
			if t, ok := stamps[stampKey(rr)]; ok {
				rr.Timestamp = t
			} else {
				rr.Timestamp = stamp(now)
			}
		}
		switch r.Outcome {
		case schedaudit.Pass:
			summary.Pass++
		case schedaudit.Fail:
			summary.Fail++
		case schedaudit.Warn:
			summary.Warn++
		case schedaudit.Skip:
			summary.Skip++
		case schedaudit.Error:
			summary.Error++
		}
		out = append(out, rr)
	}
	return out, summary
}

func stamp(t time.Time) metav1.Timestamp {
	return metav1.Timestamp{Seconds: t.Unix(), Nanos: int32(t.Nanosecond())}
}

// stampKey identifies a result for keeping its timestamp: the same policy, rule, subjects,
// outcome and message.
func stampKey(r reportsv1alpha1.ReportResult) string {
	var subjects []string
	for _, s := range r.Subjects {
		subjects = append(subjects, s.Kind+"/"+s.Namespace+"/"+s.Name)
	}
	return strings.Join([]string{r.Policy, r.Rule, string(r.Result), r.Description, strings.Join(subjects, ",")}, "\x00")
}

// category groups results for dashboards: the policy object's kind, or "decision" for what a
// controller decided.
func category(r schedaudit.Result) string {
	if d := r.Properties["decision"]; d != "" {
		return "decision"
	}
	kind, _, _ := strings.Cut(r.Policy, "/")
	return kind
}

// fromReport reads a report's result back as the audit's.
func fromReport(ns string, rr reportsv1alpha1.ReportResult) schedaudit.Result {
	r := schedaudit.Result{Namespace: ns, Policy: rr.Policy, Rule: rr.Rule, Outcome: schedaudit.Outcome(rr.Result), Severity: schedaudit.Severity(rr.Severity),
		Message: rr.Description, Properties: rr.Properties}
	for _, s := range rr.Subjects {
		r.Subjects = append(r.Subjects, schedaudit.Subject{APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name})
	}
	return r
}
