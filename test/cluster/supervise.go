package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CrashLoopBackOff is the kubelet's restart delay for a container that keeps dying: 10s,
// doubling up to five minutes (the first restart after one second), started again from the
// beginning once the process has run for ten minutes.
func CrashLoopBackOff(restarts int) time.Duration {
	if restarts == 0 {
		return time.Second
	}
	d := 10 * time.Second
	for i := 1; i < restarts && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// Supervise restarts the named processes when they exit, after backoff(restarts so far), as
// a Deployment's kubelet would, until Stop. Processes killed with Kill are restarted too:
// a test that wants one to stay down must not supervise it.
func (c *Cluster) Supervise(names []string, backoff func(restarts int) time.Duration, log func(format string, args ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.supervisor = cancel
	c.mu.Unlock()
	restarts := map[string]int{}
	go func() {
		ticker := time.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
		due := map[string]time.Time{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for _, name := range names {
				p := c.process(name)
				if p == nil {
					continue
				}
				exited, err := p.Exited()
				if !exited {
					continue
				}
				at, scheduled := due[name]
				if !scheduled {
					if time.Since(p.started) > 10*time.Minute {
						restarts[name] = 0
					}
					at = time.Now().Add(backoff(restarts[name]))
					due[name] = at
					log("%s exited (%v); restarting it in %s", name, err, time.Until(at).Round(time.Second))
					continue
				}
				if time.Now().Before(at) || ctx.Err() != nil {
					continue
				}
				delete(due, name)
				restarts[name]++
				if err := c.Restart(name); err != nil {
					log("restarting %s: %v", name, err)
				}
			}
		}
	}()
}

// Running reports whether the named process runs.
func (c *Cluster) Running(name string) bool {
	p := c.process(name)
	if p == nil {
		return false
	}
	exited, _ := p.Exited()
	return !exited
}

// LeaderElectionLease is the Lease the managers elect their leader with, in kube-system, as
// upstream's chart names it.
const LeaderElectionLease = "karpenter-leader-election"

// Leader is the name of the manager that holds the leader election Lease, read from each
// manager's leader_election_master_status gauge; "" when none reports it holds it.
func (c *Cluster) Leader(ctx context.Context) string {
	hc := &http.Client{Timeout: 2 * time.Second}
	for name, ports := range c.ManagerPorts {
		if p := c.process(name); p == nil {
			continue
		} else if exited, _ := p.Exited(); exited {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(ports.Metrics)+"/metrics", nil)
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		leads := false
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		want := `leader_election_master_status{name="` + LeaderElectionLease + `"} 1`
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == want {
				leads = true
				break
			}
		}
		resp.Body.Close()
		if leads {
			return name
		}
	}
	return ""
}

// proxy forwards TCP connections from a port on loopback to the first of its backends that
// accepts one, starting with the next in turn: what kube-proxy does for a Service.
type proxy struct {
	l        net.Listener
	backends []int
	mu       sync.Mutex
	next     int
	conns    map[net.Conn]struct{}
}

func serveProxy(port int, backends []int) (*proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	p := &proxy{l: l, backends: backends, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go p.forward(in)
	}
}

func (p *proxy) forward(in net.Conn) {
	p.mu.Lock()
	start := p.next
	p.next = (p.next + 1) % len(p.backends)
	p.mu.Unlock()
	var out net.Conn
	for i := range p.backends {
		port := p.backends[(start+i)%len(p.backends)]
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			out = c
			break
		}
	}
	if out == nil {
		in.Close()
		return
	}
	if !p.track(in, out) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// track records a connection pair, or closes it when the proxy is closed.
func (p *proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		in.Close()
		out.Close()
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}

func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
