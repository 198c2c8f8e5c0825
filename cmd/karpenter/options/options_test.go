package options

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseDefaults(t *testing.T) {
	o, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.LeaderElect || o.WebhookPort != 9443 || o.BatchIdleDuration != time.Second || o.BatchMaxDuration != 10*time.Second || o.CloudProvider != "kwok" ||
		o.DisplacedPodGrace != 5*time.Second {
		t.Fatalf("unexpected defaults: %+v", o)
	}
}

func TestEnvironmentFallbackAndFlagPrecedence(t *testing.T) {
	t.Setenv("LEADER_ELECT", "false")
	t.Setenv("BATCH_IDLE_DURATION", "2s")
	t.Setenv("WEBHOOK_PORT", "9000")
	o, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--webhook-port=9555"})
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaderElect {
		t.Error("LEADER_ELECT=false was not applied")
	}
	if o.BatchIdleDuration != 2*time.Second {
		t.Errorf("BATCH_IDLE_DURATION: got %s", o.BatchIdleDuration)
	}
	if o.WebhookPort != 9555 {
		t.Errorf("the flag must win over the environment: got %d", o.WebhookPort)
	}
}

func TestErrorsNameTheSetting(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"bad env bool":      {env: map[string]string{"LEADER_ELECT": "maybe"}, want: "LEADER_ELECT"},
		"bad env duration":  {env: map[string]string{"BATCH_MAX_DURATION": "ten"}, want: "BATCH_MAX_DURATION"},
		"idle above max":    {args: []string{"--batch-idle-duration=20s"}, want: "--batch-idle-duration"},
		"unknown provider":  {args: []string{"--cloud-provider=gcp"}, want: "--cloud-provider"},
		"port out of range": {args: []string{"--webhook-port=70000"}, want: "--webhook-port"},
		"unknown log level": {args: []string{"--log-level=trace"}, want: "--log-level"},
		"negative grace":    {args: []string{"--displaced-pod-grace=-1s"}, want: "--displaced-pod-grace"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Parse(flag.NewFlagSet("t", flag.ContinueOnError), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("expected an error naming %s, got %v", tc.want, err)
			}
		})
	}
}
