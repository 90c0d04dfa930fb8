package oadrtest

import (
	"encoding/json"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// CheckSchema validates body against one of the document's schemas (components/schemas/name),
// for what the door sends that answers no request: a subscription's notification, which a VEN
// receives on its callback.
func (c *Contract) CheckSchema(name string, body []byte) error {
	ref, ok := c.Doc.Components.Schemas[name]
	if !ok || ref == nil || ref.Value == nil {
		return fmt.Errorf("the document has no schema %q", name)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.SetSchemaRegexCompiler(ecmaScript), openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("not the document's %s: %w", name, err)
	}
	return nil
}
