// Package browser drives a real headless Chromium (Debian's `chromium`, through chromedp and
// the DevTools protocol) against the REST API's pages: the embeddable hosted flow and the
// rewards page. The helpers here are the harness; the suite (suite_test.go) starts envtest, the
// manager and the REST API, and the specs drive the browser.
//
// Every page the browser loads is served on loopback; the browser is told to resolve no other
// host (--host-resolver-rules), and its background services are off, so no test sends traffic
// anywhere else. Every request the browser makes is recorded from the DevTools network events
// (Requests), so specs can assert what did and did not travel in a URL or a header.
package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// axeSource is axe-core (Deque Systems, MPL-2.0), vendored under testdata/axe with its licence.
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// ErrNoChromium says the browser is not installed; Find wraps it with what is missing.
var ErrNoChromium = errors.New("chromium is not installed")

// Find returns the Chromium executable: $FLEXSITE_CHROMIUM, /usr/bin/chromium, or chromium
// (or chromium-browser) on PATH. hack/ensure-chromium.sh installs it.
func Find() (string, error) {
	candidates := []string{os.Getenv("FLEXSITE_CHROMIUM"), "/usr/bin/chromium"}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			candidates = append(candidates, p)
		}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if info, err := os.Stat(c); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("%w: no executable at $FLEXSITE_CHROMIUM, /usr/bin/chromium or chromium on PATH; "+
		"run hack/ensure-chromium.sh (as root it installs Debian's chromium with apt-get)", ErrNoChromium)
}

// MissingVerdict is what a suite does when the browser is missing: in CI (CI=true) the tests
// must fail, elsewhere they are skipped; message says which and why.
func MissingVerdict(err error) (fail bool, message string) {
	if os.Getenv("CI") == "true" {
		return true, "CI=true and the browser tests cannot run: " + err.Error()
	}
	return false, "skipping the browser tests: " + err.Error()
}

// Request is one request the browser sent, as the DevTools network events report it.
type Request struct {
	ID      string
	Method  string
	URL     string
	Headers map[string]string // the headers as sent (from requestWillBeSentExtraInfo), when reported
}

// Browser is one headless Chromium with one tab.
type Browser struct {
	// Ctx is the tab's chromedp context: pass it to chromedp.Run.
	Ctx    context.Context
	cancel []context.CancelFunc

	mu       sync.Mutex
	requests map[string]*Request
	order    []string
}

// Options of a browser.
type Options struct {
	// Width and Height of the window (default 1280x900).
	Width, Height int
	// UserDataDir is the profile directory (required: a test's temporary directory).
	UserDataDir string
	// Log receives the browser's console messages and chromedp's errors (optional).
	Log func(format string, args ...any)
}

// Start launches Chromium (headless, no sandbox: the tests may run as root) and opens a tab
// that records every request. Close stops it.
func Start(opts Options) (*Browser, error) {
	path, err := Find()
	if err != nil {
		return nil, err
	}
	if opts.Width == 0 {
		opts.Width, opts.Height = 1280, 900
	}
	if opts.UserDataDir == "" {
		return nil, errors.New("browser.Start: UserDataDir is required")
	}
	flags := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(opts.UserDataDir),
		chromedp.WindowSize(opts.Width, opts.Height),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		// Cross-origin iframes in the page's own process, so that the page target's network
		// events and DOM reach into the embedded flow (one DevTools session sees everything).
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("disable-features", "IsolateOrigins,site-per-process,Translate,MediaRouter,OptimizationHints"),
		// Loopback only: any other host fails to resolve.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
	)
	b := &Browser{requests: map[string]*Request{}}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), flags...)
	ctxOpts := []chromedp.ContextOption{chromedp.WithListener(func(ev any) { b.event(ev, opts.Log) })}
	if opts.Log != nil {
		ctxOpts = append(ctxOpts, chromedp.WithErrorf(opts.Log))
	}
	ctx, cancelCtx := chromedp.NewContext(allocCtx, ctxOpts...)
	b.Ctx, b.cancel = ctx, []context.CancelFunc{cancelCtx, cancelAlloc}
	// The first call starts the browser, bound to ctx (no timeout: see Run).
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return b, nil
}

// event records a request from the tab's events (it runs in the tab's loop: no commands).
func (b *Browser) event(ev any, log func(string, ...any)) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.mu.Lock()
		r := b.request(string(e.RequestID))
		r.Method, r.URL = e.Request.Method, e.Request.URL+e.Request.URLFragment
		if r.Headers == nil {
			r.Headers = headers(e.Request.Headers)
		}
		b.mu.Unlock()
	case *network.EventRequestWillBeSentExtraInfo:
		b.mu.Lock()
		b.request(string(e.RequestID)).Headers = headers(e.Headers)
		b.mu.Unlock()
	case *runtime.EventConsoleAPICalled:
		if log != nil {
			args := make([]string, 0, len(e.Args))
			for _, a := range e.Args {
				args = append(args, string(a.Value))
			}
			log("console.%s %v", e.Type, args)
		}
	}
}

func (b *Browser) request(id string) *Request {
	r, ok := b.requests[id]
	if !ok {
		r = &Request{ID: id}
		b.requests[id] = r
		b.order = append(b.order, id)
	}
	return r
}

func headers(h network.Headers) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// Requests returns every request the browser has sent so far, in order. A redirect's hops
// share an id; each hop's URL was reported, the last one is kept.
func (b *Browser) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Request, 0, len(b.order))
	for _, id := range b.order {
		r := *b.requests[id]
		r.Headers = maps(r.Headers)
		out = append(out, r)
	}
	return out
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Close stops the browser.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		if c == nil {
			continue
		}
		c()
	}
}

// Do runs actions in the tab, bounded by timeout (a guard against a hung browser, not an
// assertion about speed).
func (b *Browser) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Run runs one action that answers a value, bounded by timeout.
func Run[T any](b *Browser, timeout time.Duration, action chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	return chromedp.Run(ctx, action)
}

// Frame returns the node of the first <iframe> matching selector in the page: pass it to
// chromedp.FromNode so that queries run inside the embedded page, or to EvalInFrame.
func (b *Browser) Frame(timeout time.Duration, selector string) (*chromedp.Node, error) {
	nodes, err := Run(b, timeout, chromedp.Nodes(chromedp.CSS(selector)))
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no %s in the page", selector)
	}
	return nodes[0], nil
}

// Violation is one axe-core rule the page breaks.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axeScript runs axe-core's WCAG 2.x A and AA rules on the document it is evaluated in and
// answers the violations as JSON.
const axeScript = `
;(async () => {
  const r = await axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}});
  return JSON.stringify(r.violations);
})()`

// Axe injects axe-core into the top-level document (through DevTools, so the page's own
// Content-Security-Policy does not apply) and returns its violations.
func (b *Browser) Axe(timeout time.Duration) ([]Violation, error) {
	raw, err := Run(b, timeout, chromedp.Evaluate[string](axeSource+axeScript, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, err
	}
	return decodeViolations(raw)
}

// AxeFrame runs axe-core inside the document of an iframe (frame is the <iframe> element's
// node, as Frame returns it), in an isolated world of that frame: it reads the frame's DOM
// and styles without touching the page's own scripts or being subject to its CSP.
func (b *Browser) AxeFrame(timeout time.Duration, frame *chromedp.Node) ([]Violation, error) {
	var raw string
	if err := b.EvalInFrame(timeout, frame, axeSource+axeScript, &raw); err != nil {
		return nil, err
	}
	return decodeViolations(raw)
}

// EvalInFrame evaluates script (awaiting a promise it answers) in an isolated world of the
// iframe's document and decodes its JSON value into out (unless out is nil). The isolated
// world shares the frame's DOM, not its scripts' variables.
func (b *Browser) EvalInFrame(timeout time.Duration, frame *chromedp.Node, script string, out any) error {
	if frame == nil {
		return errors.New("EvalInFrame: no frame")
	}
	frame.RLock()
	frameID := frame.FrameID
	if frame.ContentDocument != nil && frame.ContentDocument.FrameID != "" {
		frameID = frame.ContentDocument.FrameID
	}
	frame.RUnlock()
	if frameID == "" {
		return errors.New("EvalInFrame: the node is not an iframe with a document")
	}
	return b.Do(timeout, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		world, err := cdp.Call(ctx, t, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frameID, WorldName: "flexsite-test"})
		if err != nil {
			return err
		}
		yes := true
		res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: script,
			ContextID: world.ExecutionContextID, AwaitPromise: &yes, ReturnByValue: &yes})
		if err != nil {
			return err
		}
		if exc := res.ExceptionDetails; exc != nil {
			return fmt.Errorf("script failed in the frame: %s %s", exc.Text, exceptionDetail(exc))
		}
		if out == nil || res.Result == nil {
			return nil
		}
		return json.Unmarshal(res.Result.Value, out)
	}))
}

func exceptionDetail(exc *runtime.ExceptionDetails) string {
	if exc.Exception != nil {
		return exc.Exception.Description
	}
	return ""
}

func decodeViolations(raw string) ([]Violation, error) {
	var out []Violation
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Serious keeps the violations of impact serious or critical.
func Serious(vs []Violation) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			out = append(out, v)
		}
	}
	return out
}

// Viewport sets the tab's viewport: width x height CSS pixels, as a phone (touch, mobile
// layout) when mobile is true.
func (b *Browser) Viewport(timeout time.Duration, width, height int64, mobile bool) error {
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	return b.Do(timeout, chromedp.EmulateViewport(width, height, opts...))
}

// ViewportScreenshot writes a PNG of what the viewport shows to path, creating its directory.
func (b *Browser) ViewportScreenshot(timeout time.Duration, path string) error {
	png, err := Run(b, timeout, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// Screenshot writes a PNG of the whole page (the viewport's width, the content's height) to
// path, creating its directory.
func (b *Browser) Screenshot(timeout time.Duration, path string) error {
	png, err := Run(b, timeout, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
