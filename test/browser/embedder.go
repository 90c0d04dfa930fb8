package browser

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
)

// Embedder is an organisation's web app on its own loopback origin (http://127.0.0.1:<port>):
// it serves pages that embed the hosted flow in an iframe and hand it a component token by
// postMessage, as docs/hosted-flow.md's snippet does, and keep every event the flow sends them in
// window.flexsiteEvents.
type Embedder struct {
	*httptest.Server
	mu    sync.Mutex
	pages map[string]EmbedPage
	next  atomic.Int64
}

// EmbedPage is one embedding page.
type EmbedPage struct {
	// FlowURL is the iframe's src (the REST API's /hosted/flow, with theming parameters).
	FlowURL string
	// Token is the component token handed to the flow; the backend of the organisation's app
	// would have fetched it (here it is written into the page, never into a URL).
	Token string
	// TargetOrigin is the flow's origin, postMessage's targetOrigin.
	TargetOrigin string
}

// NewEmbedder starts the embedding origin. Close it when done.
func NewEmbedder() *Embedder {
	e := &Embedder{pages: map[string]EmbedPage{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

// Origin is the embedder's origin, the one to name as a token's allowed_origin.
func (e *Embedder) Origin() string { return e.URL }

// Page registers an embedding page and returns its URL (which carries no token).
func (e *Embedder) Page(p EmbedPage) string {
	id := fmt.Sprintf("app-%d", e.next.Add(1))
	e.mu.Lock()
	e.pages[id] = p
	e.mu.Unlock()
	return e.URL + "/" + id
}

var embedTemplate = template.Must(template.New("embed").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>An organisation's app</title></head>
<body style="margin:0">
<main>
<h1 style="font:600 1.1rem system-ui,sans-serif;margin:.5rem 1rem">An organisation's app: your home energy</h1>
<iframe id="flexsite" title="Join a flexibility programme" src="{{.FlowURL}}"
  style="width:100%;height:1400px;border:0;border-top:1px solid #ccc"></iframe>
</main>
<script>
  const config = {{.Config}};
  window.flexsiteEvents = [];
  const frame = document.getElementById("flexsite");
  window.addEventListener("message", (event) => {
    if (event.origin !== config.targetOrigin || event.source !== frame.contentWindow) return;
    const data = event.data || {};
    if (data.type !== "flexsite-event") return;
    window.flexsiteEvents.push(data);
    if (data.event === "ready") {
      frame.contentWindow.postMessage({type: "flexsite-token", token: config.token}, config.targetOrigin);
    }
  });
</script>
</body></html>`))

func (e *Embedder) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	p, ok := e.pages[strings.TrimPrefix(r.URL.Path, "/")]
	e.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	config, _ := json.Marshal(map[string]string{"token": p.Token, "targetOrigin": p.TargetOrigin})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = embedTemplate.Execute(w, map[string]any{"FlowURL": p.FlowURL, "Config": template.JS(config)})
}
