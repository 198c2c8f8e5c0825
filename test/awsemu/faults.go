package awsemu

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Faults is a reverse proxy in front of the emulator that breaks chosen EC2 calls the way EC2
// does: throttling, server errors, and CreateFleet answers that report no capacity. Point the
// SDK at URL instead of the emulator's endpoint.
type Faults struct {
	URL string

	mu sync.Mutex
	// throttle and fail are how many more calls of an action answer RequestLimitExceeded or
	// 500 InternalError.
	throttle, fail map[string]int
	// noCapacity are instance types CreateFleet has no capacity for.
	noCapacity map[string]bool
	// calls counts the calls of each action that reached the proxy.
	calls map[string]int
	// requests are the forms of the calls of each action, as the SDK sent them.
	requests map[string][]url.Values
	server   *httptest.Server
}

// NewFaults starts the proxy in front of e until the test ends.
func NewFaults(t interface{ Cleanup(func()) }, e *Emulator) *Faults {
	target, _ := url.Parse(e.Endpoint)
	f := &Faults{throttle: map[string]int{}, fail: map[string]int{}, noCapacity: map[string]bool{}, calls: map[string]int{}, requests: map[string][]url.Values{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		action := form.Get("Action")
		if f.intercept(w, action, form) {
			return
		}
		if action != "CreateFleet" {
			proxy.ServeHTTP(w, r)
			return
		}
		// CreateFleet: the overrides without capacity are answered with errors, as EC2
		// does; the rest go to the emulator, whose answer gets those errors added.
		rest, refused := f.withoutCapacity(form)
		if len(refused) == 0 {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		if !strings.Contains(rest.Encode(), "Overrides") {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>fault</requestId><fleetId>fleet-fault</fleetId><errorSet>%s</errorSet><fleetInstanceSet/></CreateFleetResponse>`, fleetErrors(refused))
			return
		}
		encoded := rest.Encode()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, e.Endpoint+r.URL.RequestURI(), strings.NewReader(encoded))
		for k, vs := range r.Header {
			if k != "Content-Length" {
				req.Header[k] = vs
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ec2Error(w, http.StatusBadGateway, "InternalError", err.Error())
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		text := string(answer)
		if i := strings.Index(text, "<fleetInstanceSet"); i >= 0 {
			text = text[:i] + "<errorSet>" + fleetErrors(refused) + "</errorSet>" + text[i:]
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, text)
	}))
	f.URL = f.server.URL
	t.Cleanup(f.server.Close)
	return f
}

// Throttle makes the next n calls of action answer RequestLimitExceeded.
func (f *Faults) Throttle(action string, n int) { f.mu.Lock(); f.throttle[action] = n; f.mu.Unlock() }

// Fail makes the next n calls of action answer 500.
func (f *Faults) Fail(action string, n int) { f.mu.Lock(); f.fail[action] = n; f.mu.Unlock() }

// NoCapacity makes CreateFleet report InsufficientInstanceCapacity for these instance types.
func (f *Faults) NoCapacity(types ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range types {
		f.noCapacity[t] = true
	}
}

// Calls is how many calls of action reached the proxy.
func (f *Faults) Calls(action string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls[action] }

// Requests are the forms of the calls of action that reached the proxy, oldest first.
func (f *Faults) Requests(action string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.requests[action]...)
}

func ec2Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fault</RequestID></Response>`, code, msg)
}

func (f *Faults) intercept(w http.ResponseWriter, action string, form url.Values) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[action]++
	f.requests[action] = append(f.requests[action], form)
	if f.throttle[action] > 0 {
		f.throttle[action]--
		ec2Error(w, http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
		return true
	}
	if f.fail[action] > 0 {
		f.fail[action]--
		ec2Error(w, http.StatusInternalServerError, "InternalError", "An internal error has occurred.")
		return true
	}
	return false
}

// fleetOverride is one override of a CreateFleet request.
type fleetOverride struct{ config, index, instanceType, zone, subnet string }

// withoutCapacity splits a CreateFleet request's overrides: it returns the request without the
// ones naming a type without capacity (renumbered), and those.
func (f *Faults) withoutCapacity(form url.Values) (url.Values, []fleetOverride) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := url.Values{}
	byOverride := map[[2]string]map[string]string{}
	var order [][2]string
	for k, vs := range form {
		parts := strings.Split(k, ".")
		// LaunchTemplateConfigs.N.Overrides.M.Field
		if len(parts) == 5 && parts[0] == "LaunchTemplateConfigs" && parts[2] == "Overrides" {
			key := [2]string{parts[1], parts[3]}
			if byOverride[key] == nil {
				byOverride[key] = map[string]string{}
				order = append(order, key)
			}
			byOverride[key][parts[4]] = vs[0]
			continue
		}
		out[k] = vs
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i][0] != order[j][0] {
			return order[i][0] < order[j][0]
		}
		a, _ := strconv.Atoi(order[i][1])
		b, _ := strconv.Atoi(order[j][1])
		return a < b
	})
	var refused []fleetOverride
	next := map[string]int{}
	for _, key := range order {
		o := byOverride[key]
		if f.noCapacity[o["InstanceType"]] {
			refused = append(refused, fleetOverride{key[0], key[1], o["InstanceType"], o["AvailabilityZone"], o["SubnetId"]})
			continue
		}
		next[key[0]]++
		for field, v := range o {
			out.Set(fmt.Sprintf("LaunchTemplateConfigs.%s.Overrides.%d.%s", key[0], next[key[0]], field), v)
		}
	}
	return out, refused
}

func fleetErrors(refused []fleetOverride) string {
	var errs strings.Builder
	for _, o := range refused {
		fmt.Fprintf(&errs, `<item><launchTemplateAndOverrides><overrides><instanceType>%s</instanceType><availabilityZone>%s</availabilityZone><subnetId>%s</subnetId></overrides></launchTemplateAndOverrides><lifecycle>on-demand</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient %s capacity in the Availability Zone you requested.</errorMessage></item>`,
			o.instanceType, o.zone, o.subnet, o.instanceType)
	}
	return errs.String()
}
