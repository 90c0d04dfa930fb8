package controllers_test

import (
	. "github.com/onsi/gomega"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// reconcilesOf is how many reconciles the named controller has finished, whatever their
// result (controller-runtime's own counter, of this process's managers): a test's proof that a
// reconcile it caused has run before it asserts that the reconcile wrote nothing.
func reconcilesOf(g Gomega, controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, family := range families {
		if family.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
