package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// runLoad drives the REST API of `make run` (onboards, repeated onboards, reads, unenrols,
// enrols, bad logins) for d, while scraping the metrics endpoint every second into out: each
// scrape is the text exposition after a "# SCRAPE <unix ms>" line.
func runLoad(api, metricsURL, password, out string, d time.Duration) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()

	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if body, err := get(metricsURL, ""); err == nil {
				_, _ = fmt.Fprintf(f, "# SCRAPE %d\n%s", time.Now().UnixMilli(), body)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})

	token, err := login(api, "demo", password)
	if err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		// A new household most of the time, an existing one (already_enrolled) now and then.
		mpan := mpanOf(900000000000 + int64(i))
		if i%5 == 4 {
			mpan = mpanOf(900000000000 + int64(i-2))
		}
		var onboard struct {
			Site struct {
				SiteID string `json:"site_id"`
			} `json:"site"`
		}
		if err := call(api, "POST", "/entities/site/onboard", token, household(mpan), &onboard); err != nil {
			fmt.Fprintln(os.Stderr, "onboard:", err)
		}
		site := onboard.Site.SiteID
		_ = call(api, "GET", "/entities/site/"+site, token, nil, nil)
		_ = call(api, "GET", "/entities/site/"+site+"/eligibility", token, nil, nil)
		_ = call(api, "GET", "/entities/site?limit=20", token, nil, nil)
		switch i % 7 {
		case 3: // withdraw, then be refused re-enrolment without the override
			_ = call(api, "POST", "/entities/site/"+site+"/unenrol", token, map[string]any{"proposition": "limited_pause"}, nil)
			_ = call(api, "POST", "/entities/site/"+site+"/enrol", token, map[string]any{"proposition": "limited_pause"}, nil)
		case 5:
			_, _ = login(api, "demo", "not-the-password")
		}
		time.Sleep(150 * time.Millisecond)
	}
	wg.Wait()
	return nil
}

// mpanOf is the 13-digit MPAN whose first 12 digits are n, with its check digit.
func mpanOf(n int64) string {
	first := fmt.Sprintf("%012d", n)
	weights := []int{3, 5, 7, 13, 17, 19, 23, 29, 31, 37, 41, 43}
	sum := 0
	for i, w := range weights {
		sum += int(first[i]-'0') * w
	}
	return fmt.Sprintf("%s%d", first, sum%11%10)
}

func household(mpan string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "street_address": "1 Load Street",
			"email": "load@example.com", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	}
}

func login(api, user, password string) (string, error) {
	form := url.Values{"username": {user}, "password": {password}, "grant_type": {"password"}}
	resp, err := http.Post(api+"/auth/token-form", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.AccessToken == "" {
		return "", fmt.Errorf("login as %s: %d", user, resp.StatusCode)
	}
	return answer.AccessToken, nil
}

func call(api, method, path, token string, body, into any) error {
	var reader io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, api+path, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if into != nil {
		return json.Unmarshal(data, into)
	}
	return nil
}

func get(u, token string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return string(data), err
}
