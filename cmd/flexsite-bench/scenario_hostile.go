package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

const (
	// hostileScenario names the scenario of requests an attacker with an ordinary API client
	// would send (the security review's): what each costs the manager must stay bounded.
	hostileScenario  = "hostile"
	hostileNamespace = "bench-hostile"
	// hostileCallbacks is how many callbacks with unknown states are sent.
	hostileCallbacks = 200
)

// runHostile sends the review's requests and measures what they cost: 2.7 million empty
// readings in ~8 KB of gzip (answered 413 within a second, the manager's resident memory
// rising less than 64 MiB), and 200 OAuth callbacks with unknown states (at most one
// API-server request in all).
func runHostile(ctx context.Context, b *bench, rep *report) error {
	o, err := b.organisation(ctx, hostileNamespace, 16)
	if err != nil {
		return err
	}
	token, err := o.api.bearer(ctx)
	if err != nil {
		return err
	}

	// The readings body of the review: {"readings":[{},{},…]}, 8.1 MB, ~8 KB gzip'd.
	var plain bytes.Buffer
	plain.WriteString(`{"readings":[`)
	plain.WriteString(strings.TrimSuffix(strings.Repeat("{},", 2_700_000), ","))
	plain.WriteString(`]}`)
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(plain.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	rssBefore, err := vmRSS(b.mgr.pid())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.mgr.apiURL+"/data/readings", bytes.NewReader(gz.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	answer, _ := io.ReadAll(resp.Body)
	drain(resp)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		return fmt.Errorf("2.7 million empty readings answered %s, want 413: %s", resp.Status, firstLine(string(answer)))
	}
	rssAfter, err := vmRSS(b.mgr.pid())
	if err != nil {
		return err
	}
	rise := max(0, rssAfter-rssBefore)
	logf("2.7 million empty readings (%d bytes, %d gzip'd): 413 in %s, RSS %.0f -> %.0f MiB",
		plain.Len(), gz.Len(), took.Round(time.Millisecond), rssBefore/mib, rssAfter/mib)
	rep.add(hostileScenario, "readings_bomb_gzip_bytes", float64(gz.Len()), unitCount)
	rep.addTarget(hostileScenario, "readings_bomb_413_ms", float64(took.Microseconds())/1000, unitMS, target{"<=", 1000})
	rep.addTarget(hostileScenario, "readings_bomb_rss_rise_mib", rise/mib, unitMiB, target{"<=", 64})

	// OAuth callbacks with states no authorisation has: found (not) in the cache, never a
	// LIST of Secrets. The bench's manager lets one address fail that many callbacks
	// (--callback-failures-burst), so every one is looked up rather than refused by the limit.
	before, err := b.requests.snapshotAll(ctx)
	if err != nil {
		return err
	}
	statuses := map[int]int{}
	for i := range hostileCallbacks {
		url := fmt.Sprintf("%s/oauth/callback?code=x&state=bench-unknown-state-%04d-%s", b.mgr.apiURL, i, strings.Repeat("s", 32))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := b.http.Do(req)
		if err != nil {
			return err
		}
		drain(resp)
		statuses[resp.StatusCode]++
	}
	after, err := b.requests.snapshotAll(ctx)
	if err != nil {
		return err
	}
	calls := after.minus(before).where(func(k requestKey) bool {
		return slices.Contains([]string{"secrets", "deviceconnections"}, k.Resource)
	})
	logf("%d callbacks with unknown states: statuses %v; API-server requests for Secrets and DeviceConnections: %s",
		hostileCallbacks, statuses, calls.perUnitString(1))
	rep.addTarget(hostileScenario, "callbacks_unknown_api_requests", calls.total(), unitCount, target{"<=", 1})
	rep.detail("hostile_callback_statuses", statuses)
	return nil
}
