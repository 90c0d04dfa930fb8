package facade_test

import (
	"cmp"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/facade"
	"github.com/flexsite/flexsite/internal/facade/apidocs"
)

var _ = Describe("The OpenAPI document", func() {
	It("documents every route the facade serves, and the facade serves every documented path", func() {
		served := facadeSrv.Routes()
		paths := apidocs.Paths()
		documented := make([]facade.Route, 0, len(paths))
		for _, r := range paths {
			documented = append(documented, facade.Route{Method: r.Method, Path: r.Path})
		}
		less := func(a, b facade.Route) int {
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
