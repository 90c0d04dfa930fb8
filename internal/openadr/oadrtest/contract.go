// Package oadrtest checks answers against the Alliance's OpenADR 3.0.1 document, for the
// suites that call the OpenADR door: every answer of a documented status must validate
// against its schema, and an undocumented status is reported, so a test can tell the two.
package oadrtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/dlclark/regexp2"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/flexsite/flexsite/internal/openadr/oadr"
)

// Contract is the Alliance's document, loaded and routed.
type Contract struct {
	Doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	// Checked counts the answers validated, by operation id and status.
	Checked map[string]map[int]int
}

// Load reads the document embedded in internal/openadr/oadr, served at base (a URL with the
// scheme and host the test calls, e.g. http://127.0.0.1:1234).
func Load(base string) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(oadr.Document)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background(), openapi3.SetRegexCompiler(ecmaScript),
		// The document's own example of a notification lacks its discriminator.
		openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("the Alliance's document: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: strings.TrimSuffix(base, "/") + oadr.BasePath}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Contract{Doc: doc, router: router, Checked: map[string]map[int]int{}}, nil
}

// Operations are the document's operations, as "METHOD /path" under oadr.BasePath.
func (c *Contract) Operations() []string {
	var out []string
	for path, item := range c.Doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+oadr.BasePath+path)
		}
	}
	return out
}

// Check validates the answer (status, headers, body) to req against the document. It answers
// an error naming the operation and what breaks it; an answer whose status the document does
// not list for the operation is an error too, unless allowed lists that status (401, 429 and
// 503 are statuses every door answers that the document leaves out).
func (c *Contract) Check(req *http.Request, status int, header http.Header, body []byte, allowed ...int) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: no operation of the document: %w", req.Method, req.URL.Path, err)
	}
	op := route.Operation.OperationID
	if route.Operation.Responses.Status(status) == nil {
		for _, a := range allowed {
			if a == status {
				return nil
			}
		}
		return fmt.Errorf("%s: status %d is not one the document lists", op, status)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: status,
		Header: header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.SetSchemaRegexCompiler(ecmaScript)}},
	}
	// The problem answers are application/problem+json: the document describes them as
	// application/json, the same body.
	h := header.Clone()
	if strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		h.Set("Content-Type", "application/json")
	}
	in.Header = h
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		// A message to read: the validation error holds the whole request.
		return fmt.Errorf("%s %d: %s", op, status, err.Error()) //nolint:errorlint // as above
	}
	c.mu.Lock()
	if c.Checked[op] == nil {
		c.Checked[op] = map[int]int{}
	}
	c.Checked[op][status]++
	c.mu.Unlock()
	return nil
}

// Request builds the request Check needs to find the operation: method and the URL called.
func Request(method, rawURL string) (*http.Request, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return &http.Request{Method: method, URL: u, Header: http.Header{}}, nil
}

// ecmaScript compiles the document's patterns as OpenAPI means them (ECMA-262): the duration
// pattern's lookahead is beyond Go's regexp.
func ecmaScript(expr string) (openapi3.RegexMatcher, error) {
	re, err := regexp2.Compile(expr, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return matcher{re}, nil
}

type matcher struct{ re *regexp2.Regexp }

func (m matcher) MatchString(s string) bool {
	ok, err := m.re.MatchString(s)
	return ok && err == nil
}
