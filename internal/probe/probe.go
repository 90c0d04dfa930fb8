// Package probe is what the tools and suites share to wait for and read a running Flexsite
// (the bench, hack/etcdcost): Retry until something answers, and the samples of a Prometheus
// text endpoint. Nothing of the product imports it.
package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Retry calls f every so often until it answers nil or the time limit is up, and returns f's
// last error (with ctx's when ctx ended first).
func Retry(ctx context.Context, limit, every time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(every):
		}
	}
}

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Fetch GETs a Prometheus text endpoint and returns the samples of the named metrics.
func Fetch(ctx context.Context, hc *http.Client, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body, names)
}

// Parse reads the samples of the wanted metrics from the Prometheus text format. It is a
// small parser of its own: the format is simple and the tools need only a few series.
func Parse(r io.Reader, names []string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 || !slices.Contains(names, line[:end]) {
			continue
		}
		s := Sample{Name: line[:end], Labels: map[string]string{}}
		tail := line[end:]
		if tail[0] == '{' {
			var err error
			if tail, err = parseLabels(tail[1:], s.Labels); err != nil {
				return nil, fmt.Errorf("%w in %q", err, line)
			}
		}
		fields := strings.Fields(tail)
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// parseLabels reads `k="v",...}` into labels and returns what follows the closing brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		key, quoted, ok := strings.Cut(s, `="`)
		if !ok {
			return "", fmt.Errorf("malformed labels")
		}
		var value strings.Builder
		i := 0
		for ; i < len(quoted) && quoted[i] != '"'; i++ {
			if quoted[i] == '\\' && i+1 < len(quoted) {
				i++
				if quoted[i] == 'n' {
					value.WriteByte('\n')
					continue
				}
			}
			value.WriteByte(quoted[i])
		}
		if i == len(quoted) {
			return "", fmt.Errorf("unterminated label value")
		}
		labels[key] = value.String()
		s = quoted[i+1:]
	}
}

// SumOf adds the values of a metric's samples (every label set).
func SumOf(samples []Sample, name string) float64 {
	total := 0.0
	for _, s := range samples {
		if s.Name == name {
			total += s.Value
		}
	}
	return total
}
