// Package ven is a VEN client generated from the OpenADR Alliance's 3.0.1 document
// (internal/openadr/oadr/openadr3-3.0.1.yaml, unchanged) by oapi-codegen: the types and the
// client, nothing written by hand. Its suite (docs/openadr.md, "For VEN makers") walks a
// VEN through a flex event against Flexsite, so the door is checked by a client the project
// did not write.
package ven

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -generate types,client -package ven -o client.gen.go ../../internal/openadr/oadr/openadr3-3.0.1.yaml
