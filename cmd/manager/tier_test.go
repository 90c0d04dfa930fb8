package main

import (
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/priority"
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
