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

// newHTTPClient is the keep-alive client every load generator shares: one transport that
// keeps at least one idle connection per concurrent client, so no request pays a handshake
// after warm-up.
func newHTTPClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * concurrency
	t.MaxIdleConnsPerHost = 2 * concurrency
	t.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}

// probeClient reads metrics, pprof and readiness: its own connections, so probing does not
// take connections from the load generators, and no gzip, so the manager spends no CPU
// compressing what the bench polls several times a second.
var probeClient = newProbeClient()

func newProbeClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}

// fetch GETs addr and discards a 200 answer.
func fetch(ctx context.Context, hc *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", addr, resp.Status)
	}
	return nil
}

// saveURL GETs addr with the probe client and writes the body to path (a pprof profile).
func saveURL(ctx context.Context, addr, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", addr, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// drain reads the rest of a body and closes it: a connection goes back to the idle pool only
// once its body was read to the end.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// apiClient speaks to the REST API as one organisation's API client.
type apiClient struct {
	base               string
	http               *http.Client
	username, password string

	mu      sync.Mutex
	token   string
	tokenAt time.Time
}

// tokenLifetime is less than the REST API's hour, so a long full run never uses a stale token.
const tokenLifetime = 45 * time.Minute

// login gets an organisation token through the OAuth2 password flow.
func (a *apiClient) login(ctx context.Context) error {
	form := url.Values{"username": {a.username}, "password": {a.password}, "grant_type": {"password"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/auth/token-form", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := a.roundTrip(req, &out); err != nil {
		return err
	}
	a.mu.Lock()
	a.token, a.tokenAt = out.AccessToken, time.Now()
	a.mu.Unlock()
	return nil
}

func (a *apiClient) bearer(ctx context.Context) (string, error) {
	a.mu.Lock()
	fresh := a.token != "" && time.Since(a.tokenAt) < tokenLifetime
	token := a.token
	a.mu.Unlock()
	if fresh {
		return token, nil
	}
	if err := a.login(ctx); err != nil {
		return "", err
	}
	return a.bearer(ctx)
}

// call sends an authenticated request with an optional JSON body and decodes a 200 answer
// into out (nil: discard it).
func (a *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	token, err := a.bearer(ctx)
	if err != nil {
		return err
	}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return a.roundTrip(req, out)
}

func (a *apiClient) roundTrip(req *http.Request, out any) error {
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode/100 != 2 { // 200, or 201 for a declaration made first
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, firstLine(string(data)))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
