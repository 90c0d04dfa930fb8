package server_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

var _ = Describe("An API client with every role", func() {
	It("is admitted and logs in, as the embedded demo organisation needs (the CRD's bound on roles follows flexv1.Roles)", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.Roles...)
		roles := mustCall("GET", "/auth/users/me/", o.token(), nil)["roles"]
		want := make([]any, len(flexv1.Roles))
		for i, r := range flexv1.Roles {
			want[i] = string(r)
		}
		Expect(roles).To(ConsistOf(want...))
	})
})
