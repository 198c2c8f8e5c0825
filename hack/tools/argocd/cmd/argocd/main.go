// Command argocd runs the parts of ArgoCD the local GitOps stack needs, on loopback:
//
//	argocd application-controller [flags]   ArgoCD's application controller
//	argocd repo-server [flags]              ArgoCD's repo server
//	argocd redis --addr 127.0.0.1:PORT      a Redis (miniredis) for their caches
//
// The first two are ArgoCD's own commands, unchanged; nothing here alters what they do.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd application-controller|repo-server|redis [flags]")
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "application-controller":
		cmd := appcontroller.NewCommand()
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
	case "repo-server":
		cmd := reposerver.NewCommand()
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
	case "redis":
		fs := flag.NewFlagSet("redis", flag.ExitOnError)
		addr := fs.String("addr", "127.0.0.1:6379", "address to listen on")
		_ = fs.Parse(args)
		r := miniredis.NewMiniRedis()
		if err := r.StartAddr(*addr); err != nil {
			fmt.Fprintln(os.Stderr, "redis:", err)
			os.Exit(1)
		}
		fmt.Println("redis listening on", r.Addr())
		// miniredis counts TTLs down only when told to: every second, so that ArgoCD's cache
		// entries (a branch's resolved commit among them) expire as they would on Redis.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		for {
			select {
			case <-tick.C:
				r.FastForward(time.Second)
			case <-sig:
				r.Close()
				return
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "argocd: unknown command %q\n", name)
		os.Exit(2)
	}
}
