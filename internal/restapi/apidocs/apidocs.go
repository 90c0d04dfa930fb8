// Package apidocs serves the REST API's OpenAPI 3.1 document and a human-readable rendering
// of it (Swagger UI), both embedded in the binary: the docs work without internet access.
//
// Mount Handler on the REST API's mux for the paths it answers:
//
//	h := apidocs.Handler()
//	mux.Handle("GET /openapi.json", h)
//	mux.Handle("GET /docs", h)
//	mux.Handle("GET /docs/", h)
package apidocs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

var (
	//go:embed openapi.json
	document []byte
	//go:embed index.html
	indexHTML []byte
	//go:embed assets
	assetFS embed.FS
)

// docsCSP allows the docs page nothing but its own scripts, styles and the API itself. Swagger UI
// sets inline style attributes and its stylesheet embeds data: images.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Route is one operation of the document: an HTTP method and a path template such as
// /entities/site/{site_id}.
type Route struct {
	Method string
	Path   string
}

// Document returns the OpenAPI document bytes.
func Document() []byte { return slices.Clone(document) }

// Paths returns every (method, path) the document describes, sorted by path, then method.
func Paths() []Route { return slices.Clone(routes()) }

var routes = sync.OnceValue(func() []Route {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(document, &doc); err != nil {
		panic("apidocs: embedded openapi.json: " + err.Error())
	}
	var out []Route
	for p, item := range doc.Paths {
		for key := range item {
			switch key {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, Route{Method: strings.ToUpper(key), Path: p})
			}
		}
	}
	slices.SortFunc(out, func(a, b Route) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	return out
})

// Handler serves GET /openapi.json, GET /docs and the docs' assets under /docs/assets/. It
// expects the request's full path (do not strip a prefix in front of it).
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /openapi.json", file("openapi.json", document, "application/json", "no-cache"))
	mux.Handle("GET /docs", withHeader("Content-Security-Policy", docsCSP,
		file("index.html", indexHTML, "text/html; charset=utf-8", "no-cache")))
	mux.HandleFunc("GET /docs/{$}", func(w http.ResponseWriter, _ *http.Request) {
		// Relative, so it also works behind a path prefix; the page's asset URLs assume /docs.
		w.Header().Set("Location", "../docs")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	mux.Handle("GET /docs/assets/", assetHandler())
	return mux
}

// assetHandler serves the files of assets/ (no directory listings), cacheable for a day and
// revalidated by ETag after that.
func assetHandler() http.Handler {
	files := map[string]http.Handler{}
	entries, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic("apidocs: embedded assets: " + err.Error())
	}
	for _, e := range entries {
		b, err := fs.ReadFile(assetFS, "assets/"+e.Name())
		if err != nil {
			panic("apidocs: embedded assets: " + err.Error())
		}
		files[e.Name()] = file(e.Name(), b, contentType(e.Name()), "public, max-age=86400")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := files[strings.TrimPrefix(r.URL.Path, "/docs/assets/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	default:
		return "text/plain; charset=utf-8"
	}
}

// file serves b with a strong ETag, so clients revalidate cheaply (304) and ranges, HEAD and
// conditional requests work.
func file(name string, b []byte, ctype, cacheControl string) http.Handler {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", etag)
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

func withHeader(key, value string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(key, value)
		next.ServeHTTP(w, r)
	})
}
