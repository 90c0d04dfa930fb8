// Package embedded runs a local Kubernetes control plane (etcd + kube-apiserver, built by
// hack/ensure-k8s-binaries.sh) for `make run`: a newcomer gets the whole operator and its REST
// API on one machine with no cluster. It reuses controller-runtime's envtest machinery, which
// already knows how to start, wire and stop these processes.
package embedded

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure the embedded control plane.
type Options struct {
	// BinaryDir holds etcd, kube-apiserver and kubectl.
	BinaryDir string
	// CRDDir holds the CustomResourceDefinitions to install. The sharder's (ControllerRing),
	// kept beside it in ../external, is installed too.
	CRDDir string
	// DataDir keeps etcd's data between runs; empty means a throwaway directory.
	DataDir string
	// KubeconfigPath is where an admin kubeconfig for kubectl is written.
	KubeconfigPath string
	// WebhookDir holds the admission webhook configurations to install, pointed at the local
	// webhook server with a generated serving certificate; empty installs none.
	WebhookDir string
}

// ControlPlane is a running embedded control plane.
type ControlPlane struct {
	env    *envtest.Environment
	Config *rest.Config
	// Webhook is where the manager's webhook server must listen, and its certificates.
	Webhook WebhookServing
}

// WebhookServing is the local webhook server's address and certificate directory, and the
// CA of its certificate (for a webhook configuration made at run time: the sharder's).
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
	CAData  []byte
}

// Start brings up etcd and kube-apiserver, installs the CRDs and writes the kubeconfig.
func Start(opts Options) (*ControlPlane, error) {
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(opts.BinaryDir, bin)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s not found in %q (run hack/ensure-k8s-binaries.sh): %w",
				bin, opts.BinaryDir, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: opts.BinaryDir,
		CRDDirectoryPaths:     crdDirs(opts.CRDDir),
		ErrorIfCRDPathMissing: true,
	}
	if opts.WebhookDir != "" {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{opts.WebhookDir}, IgnoreErrorIfPathMissing: false}
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, err
		}
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: opts.DataDir}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the embedded control plane: %w", err)
	}
	wh := env.WebhookInstallOptions
	cp := &ControlPlane{env: env, Config: cfg,
		Webhook: WebhookServing{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
			CAData: wh.LocalServingCAData}}
	if opts.KubeconfigPath != "" {
		if err := cp.writeKubeconfig(opts.KubeconfigPath); err != nil {
			_ = cp.Stop()
			return nil, err
		}
	}
	return cp, nil
}

// writeKubeconfig provisions an admin user and writes a kubeconfig for it.
func (cp *ControlPlane) writeKubeconfig(path string) error {
	user, err := cp.env.AddUser(envtest.User{Name: "flexsite-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("provisioning the kubeconfig user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Stop ends kube-apiserver and etcd.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

// crdDirs is dir and, where it exists, the external CRDs beside it (config/crd/external: the
// sharder's ControllerRing, as upstream ships it).
func crdDirs(dir string) []string {
	external := filepath.Join(filepath.Dir(dir), "external")
	if st, err := os.Stat(external); err == nil && st.IsDir() {
		return []string{dir, external}
	}
	return []string{dir}
}
