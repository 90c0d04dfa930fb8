package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/shards"
)

// Flags that contradict the tier are refused before anything starts, with a message that
// names the flags.
func TestTierFlags(t *testing.T) {
	valid := func(o options) options {
		o.maxSubscriptions, o.backgroundShare = 1, priority.DefaultShare
		return o
	}
	for name, c := range map[string]struct {
		o    options
		want string // "" accepted; else a word of the refusal
	}{
		"all, as make run has it":          {o: options{tier: tierAll}},
		"all with shards and the sharder":  {o: options{tier: tierAll, shard: true, sharder: true}},
		"api":                              {o: options{tier: tierAPI, leaderElect: true}},
		"controllers (shard implied)":      {o: options{tier: tierControllers, shard: true, leaderElect: true}},
		"api with --shard":                 {o: options{tier: tierAPI, shard: true}, want: "--shard"},
		"api with --sharder":               {o: options{tier: tierAPI, sharder: true}, want: "--sharder"},
		"controllers with --shard=false":   {o: options{tier: tierControllers, shardSet: true}, want: "--shard=false"},
		"controllers with --sharder":       {o: options{tier: tierControllers, shard: true, sharder: true}, want: "own Deployment"},
		"controllers with --embedded":      {o: options{tier: tierControllers, shard: true, embedded: true}, want: "--embedded"},
		"controllers installing the rules": {o: options{tier: tierControllers, shard: true, installRules: true}, want: "--install-default-rules"},
		"an unknown tier":                  {o: options{tier: "workers"}, want: "--tier must be one of"},
	} {
		t.Run(name, func(t *testing.T) {
			err := valid(c.o).validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatal("accepted")
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("refused with %q, want it to say %q", err, c.want)
			}
		})
	}
}

// The controller tier's cache is narrowed to its shard's households; the API tier's is whole,
// and its leader lease is held with the API tier's identity.
func TestTierOptions(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	narrowed := func(c cache.Options) bool {
		for obj, by := range c.ByObject {
			if _, ok := obj.(*flexv1.Site); ok && by.Label != nil {
				return by.Label.Matches(labels.Set{shards.ShardLabel: "flexsite-controllers-0"}) &&
					!by.Label.Matches(labels.Set{shards.ShardLabel: "flexsite-controllers-1"})
			}
		}
		return false
	}
	c, lease, err := options{tier: tierControllers, shardName: "flexsite-controllers-0", leaderElect: true}.tierOptions(cfg, "ns")
	if err != nil || lease != nil || !narrowed(c) {
		t.Fatalf("controllers: narrowed %v, lease %v, %v", narrowed(c), lease, err)
	}
	for _, tier := range []string{tierAPI, tierAll} {
		c, lease, err := options{tier: tier, shardName: "flexsite-0", leaderElect: true}.tierOptions(cfg, "ns")
		if err != nil || narrowed(c) {
			t.Fatalf("%s: narrowed %v, %v", tier, narrowed(c), err)
		}
		if got := tier == tierAPI; (lease != nil) != got {
			t.Fatalf("%s: lease %v", tier, lease)
		}
		if lease != nil && !strings.HasPrefix(lease.Identity(), shards.APIHolderPrefix+"flexsite-0_") {
			t.Fatalf("the API tier holds the lease as %q", lease.Identity())
		}
	}
}
