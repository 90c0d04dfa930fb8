// Package oadr holds the OpenADR Alliance's OpenAPI document for OpenADR 3.0.1 (unchanged,
// Apache 2.0: see NOTICE) and the Go shapes generated from it. The OpenADR door reads and
// answers these shapes; nothing else in Flexsite speaks them (docs/openadr.md).
package oadr

import _ "embed"

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -generate types -package oadr -o types.gen.go openadr3-3.0.1.yaml

// Document is the Alliance's document, as published: the contract every answer of the door
// is checked against.
//
//go:embed openadr3-3.0.1.yaml
var Document []byte

// BasePath is where the door serves the document's operations.
const BasePath = "/openadr3/3.0.1"
