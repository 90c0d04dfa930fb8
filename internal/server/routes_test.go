package server_test

import (
	"cmp"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/restapi/apidocs"
	"github.com/flexsite/flexsite/internal/server"
)

var _ = Describe("The OpenAPI document", func() {
	It("documents every route the REST API serves, and the REST API serves every documented path", func() {
		served := apiSrv.Routes()
		paths := apidocs.Paths()
		documented := make([]server.Route, 0, len(paths))
		for _, r := range paths {
			documented = append(documented, server.Route{Method: r.Method, Path: r.Path})
		}
		less := func(a, b server.Route) int {
			if a.Path != b.Path {
				return cmp.Compare(a.Path, b.Path)
			}
			return cmp.Compare(a.Method, b.Method)
		}
		slices.SortFunc(served, less)
		slices.SortFunc(documented, less)
		Expect(served).To(Equal(documented))
	})
})
