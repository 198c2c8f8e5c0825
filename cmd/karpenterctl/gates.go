package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
)

// exitGate is plan's exit status when the head is valid but a CI gate fails.
const exitGate = 3

// Gate names, as every output format names them.
const (
	gateMaxIncrease   = "max-increase"
	gateFailOnBlocked = "fail-on-blocked"
	gateFailOnWarn    = "fail-on-warn"
)

// gateResult is one CI gate of a plan.
type gateResult struct {
	Name    string `json:"name"`
	Passed  bool   `json:"passed"`
	Message string `json:"message"`
}

// maxIncrease is --max-increase: an amount of dollars per hour, or a share of the base's
// $/hour.
type maxIncrease struct {
	set     bool
	amount  float64
	percent bool
}

func (m *maxIncrease) String() string {
	if !m.set {
		return ""
	}
	if m.percent {
		return strconv.FormatFloat(m.amount, 'f', -1, 64) + "%"
	}
	return strconv.FormatFloat(m.amount, 'f', -1, 64)
}

// Set parses "0.50" (USD per hour) or "10%" (of the base's $/hour).
func (m *maxIncrease) Set(v string) error {
	s, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || strings.ContainsAny(s, "eEx+-") {
		return fmt.Errorf("want an amount of dollars per hour (0.50) or a percentage of the base's $/hour (10%%), got %q", v)
	}
	*m = maxIncrease{set: true, amount: f, percent: pct}
	return nil
}

// planGates are the gates a plan was asked to check.
type planGates struct {
	maxIncrease   maxIncrease
	failOnBlocked bool
	failOnWarn    bool
}

// check evaluates the gates on a plan whose head is valid.
func (g *planGates) check(r *planReport) []gateResult {
	var out []gateResult
	if g.maxIncrease.set {
		base, head := r.Base.Totals.PricePerHour, r.Head.Totals.PricePerHour
		allowed, what := g.maxIncrease.amount, fmt.Sprintf("$%.2f/hour", g.maxIncrease.amount)
		if g.maxIncrease.percent {
			allowed = base * g.maxIncrease.amount / 100
			what = fmt.Sprintf("%s of the base's $%.4f/hour, $%.4f/hour", g.maxIncrease.String(), base, allowed)
		}
		inc := head - base
		res := gateResult{Name: gateMaxIncrease, Passed: inc <= allowed+1e-9}
		if res.Passed {
			res.Message = fmt.Sprintf("$/hour %+.4f (%.4f -> %.4f) is within %s", inc, base, head, what)
		} else {
			res.Message = fmt.Sprintf("$/hour %+.4f (%.4f -> %.4f) is more than %s", inc, base, head, what)
		}
		out = append(out, res)
	}
	if g.failOnBlocked {
		n := len(r.Delta.NewlyBlocked)
		res := gateResult{Name: gateFailOnBlocked, Passed: n == 0, Message: "no pod newly blocked"}
		if n > 0 {
			why := reasons(r)
			groups := podGroups(r.Delta.NewlyBlocked, func(pod string) string { return why[pod] })
			first := groups[0]
			what := first.pods[0]
			if !first.listed() {
				what = first.summary()
			}
			res.Message = fmt.Sprintf("%d pods newly blocked, the base places them; first %s: %s", n, what, first.reason)
		}
		out = append(out, res)
	}
	if g.failOnWarn {
		// Admission warnings: what the webhook would warn about. Rules undecided offline are
		// reported, not counted: they say what the inputs lack, not what admission would say.
		n := len(r.Warnings)
		res := gateResult{Name: gateFailOnWarn, Passed: n == 0, Message: "no admission warning"}
		if n > 0 {
			res.Message = fmt.Sprintf("%d admission warnings; first %s", n, r.Warnings[0].String())
		}
		out = append(out, res)
	}
	return out
}

// failed are the gates that failed.
func failed(gates []gateResult) []gateResult {
	var out []gateResult
	for _, g := range gates {
		if !g.Passed {
			out = append(out, g)
		}
	}
	return out
}

// JUnit XML, as CI systems read test reports (the schema Jenkins, GitLab and GitHub
// reporters share): a test suite with a test case per gate and per invalid object.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// add appends a case and counts it.
func (s *junitSuite) add(c junitCase) {
	if c.Time == "" {
		c.Time = "0"
	}
	s.Cases = append(s.Cases, c)
	s.Tests++
	switch {
	case c.Failure != nil:
		s.Failures++
	case c.Skipped != nil:
		s.Skipped++
	}
}

// writeJUnit writes the suites as an XML document.
func writeJUnit(w io.Writer, suites ...junitSuite) error {
	for i := range suites {
		if suites[i].Time == "" {
			suites[i].Time = "0"
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: suites}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// problemCases are a test case per object with its problems as the failure.
func problemCases(class string, problems []offline.Problem) []junitCase {
	var out []junitCase
	index := map[string]int{}
	for _, p := range problems {
		name := fmt.Sprintf("%s/%s (%s:%d)", p.Kind, p.Name, p.File, p.Line)
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, junitCase{Name: name, Classname: class, Failure: &junitMessage{Type: "invalid"}})
		}
		f := out[i].Failure
		if f.Message == "" {
			f.Message = p.String()
		}
		f.Text += p.String() + "\n"
	}
	return out
}

// writePlanJUnit writes a plan as JUnit XML: a case per gate (skipped when the head is
// invalid), a case per invalid object, and one for the head's validity when none is.
func writePlanJUnit(w io.Writer, r *planReport, g *planGates) {
	suite := junitSuite{Name: "karpenterctl plan"}
	if len(r.Invalid) == 0 {
		suite.add(junitCase{Name: "the head is valid", Classname: "karpenterctl.validate"})
	}
	for _, c := range problemCases("karpenterctl.validate", r.Invalid) {
		suite.add(c)
	}
	if len(r.Invalid) > 0 {
		for _, name := range g.names() {
			suite.add(junitCase{Name: "gate " + name, Classname: "karpenterctl.plan", Skipped: &junitMessage{Message: "the head is invalid: the plan was not simulated"}})
		}
	}
	for _, res := range r.Gates {
		c := junitCase{Name: "gate " + res.Name, Classname: "karpenterctl.plan", SystemOut: res.Message}
		if !res.Passed {
			c.Failure = &junitMessage{Message: res.Message, Type: "gate", Text: res.Message}
		}
		suite.add(c)
	}
	_ = writeJUnit(w, suite)
}

// names are the gates asked for, in their order.
func (g *planGates) names() []string {
	var out []string
	if g.maxIncrease.set {
		out = append(out, gateMaxIncrease)
	}
	if g.failOnBlocked {
		out = append(out, gateFailOnBlocked)
	}
	if g.failOnWarn {
		out = append(out, gateFailOnWarn)
	}
	return out
}
