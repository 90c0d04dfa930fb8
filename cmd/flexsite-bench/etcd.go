package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// etcdBudgetBytesPerSite is what a site may store in etcd whatever its reward history
// (docs/scale.md, "What a household costs": ≤ 10 KB).
const etcdBudgetBytesPerSite = 10 * 1024

// measureEtcdPerSite reports what a site of ns stores in etcd: the JSON of its Site, Assets,
// Enrolment and RewardLedger as the API server keeps them (managed fields included), averaged
// over the namespace's sites.
func measureEtcdPerSite(ctx context.Context, b *bench, rep *report, ns string) error {
	kinds := []string{"Site", "Asset", "Enrolment", "RewardLedger"}
	var sites, total float64
	for _, kind := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: flexv1.GroupVersion.Group, Version: flexv1.GroupVersion.Version,
			Kind: kind + "List"})
		if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		var bytes float64
		for i := range list.Items {
			data, err := json.Marshal(list.Items[i].Object)
			if err != nil {
				return err
			}
			bytes += float64(len(data))
			if i == 0 && b.mgrCfg.logPath != "" {
				// A sample of each kind as stored, to see where the bytes go.
				sample, _ := json.MarshalIndent(list.Items[i].Object, "", "  ")
				_ = os.WriteFile(filepath.Join(filepath.Dir(b.mgrCfg.logPath), "etcd-sample-"+kind+".json"), sample, 0o600)
			}
		}
		if kind == "Site" {
			sites = float64(len(list.Items))
		}
		if sites == 0 {
			return nil
		}
		total += bytes
		rep.add("scale", "etcd_kb_per_site_"+kind, bytes/sites/1024, unitKB)
	}
	rep.add("scale", "etcd_kb_per_site", total/sites/1024, unitKB)
	rep.addTarget("scale", "etcd_bytes_per_site_vs_10kb_ratio", total/sites/etcdBudgetBytesPerSite, unitRatio, target{"<=", 1})
	return nil
}
