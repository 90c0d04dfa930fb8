// Package bootstrap installs what a new Flexsite installation starts from: the default
// eligibility rules (Propositions and AssetModels, from YAML a platform team can read and
// change) and, for the embedded development setup, a demo organisation with an API client.
package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// FieldManager is the field manager of the objects the bootstrap creates.
const FieldManager = "flexsite-bootstrap"

// ApplyDefaults creates every object of the YAML files in dir that does not exist yet, as
// `kubectl create --save-config` would: each carries kubectl's last-applied-configuration
// annotation, so that a later `kubectl apply` of the same files (config/rules, or the copies
// in config/samples) finds them unchanged and warns of nothing, and a later edit applied with
// kubectl merges three ways (a field removed from the file is removed from the object).
// Existing objects are left as they are: a platform team's edits to the rules win over the
// defaults on every restart. kustomization.yaml files are skipped.
func ApplyDefaults(ctx context.Context, c client.Client, dir string) (created int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	sort.Strings(files)
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		objs, err := readObjects(file)
		if err != nil {
			return created, err
		}
		for _, obj := range objs {
			if err := SetLastApplied(obj); err != nil {
				return created, fmt.Errorf("%s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
			err := c.Create(ctx, obj, client.FieldOwner(FieldManager))
			switch {
			case err == nil:
				created++
			case apierrors.IsAlreadyExists(err):
			default:
				return created, fmt.Errorf("creating %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}
	return created, nil
}

func readObjects(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// SetLastApplied sets obj's kubectl.kubernetes.io/last-applied-configuration annotation to
// what `kubectl apply -f` of obj would record: obj's JSON without that annotation (with an
// empty annotations map where it had none, as kubectl leaves it), followed by a newline.
func SetLastApplied(obj *unstructured.Unstructured) error {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	obj.SetAnnotations(annotations)
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	annotations[corev1.LastAppliedConfigAnnotation] = string(data) + "\n"
	obj.SetAnnotations(annotations)
	return nil
}

// passwordHashKey is the Secret key that holds an API client's bcrypt password hash.
const passwordHashKey = "password-hash"

// Organisation describes an organisation (a namespace) and one API client of it.
type Organisation struct {
	// Namespace of the organisation.
	Namespace string
	// Username and Password of its API client. The password is stored only as a bcrypt hash.
	Username string
	Password string
	Roles    []flexv1.Role
}

// DemoNamespace is the embedded setup's demo organisation (`make run`), which the samples
// in config/samples also declare.
const DemoNamespace = "demo"

// DemoOrganisation is the embedded setup's demo organisation: namespace and API client
// "demo" with every role, logging in with password.
func DemoOrganisation(password string) Organisation {
	return Organisation{
		Namespace: DemoNamespace, Username: "demo", Password: password,
		Roles: slices.Clone(flexv1.Roles),
	}
}

// EnsureOrganisation creates the organisation's namespace and API client, and (re)sets the
// client's password hash when the password no longer matches it.
func EnsureOrganisation(ctx context.Context, c client.Client, org Organisation) error {
	// The namespace is created as `kubectl apply` of flexsite-admin's (and the samples') YAML
	// for it would create it, so that applying that YAML afterwards changes nothing.
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": org.Namespace, "labels": map[string]any{flexv1.OrganisationLabel: org.Namespace}},
	}}
	if err := SetLastApplied(ns); err != nil {
		return err
	}
	if err := c.Create(ctx, ns, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", org.Namespace, err)
	}

	secretName := strings.ToLower(org.Username) + "-credentials"
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: org.Namespace, Name: secretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		hash, err := bcrypt.GenerateFromPassword([]byte(org.Password), bcrypt.DefaultCost)
		if err != nil {
			return err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: org.Namespace, Name: secretName, Labels: index.CredentialsLabels()},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{passwordHashKey: hash},
		}
		if err := c.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating secret %s/%s: %w", org.Namespace, secretName, err)
		}
	case err != nil:
		return err
	default:
		update := false
		if bcrypt.CompareHashAndPassword(secret.Data[passwordHashKey], []byte(org.Password)) != nil {
			hash, err := bcrypt.GenerateFromPassword([]byte(org.Password), bcrypt.DefaultCost)
			if err != nil {
				return err
			}
			secret.Data = map[string][]byte{passwordHashKey: hash}
			update = true
		}
		// A Secret made before the manager required the label (a `make run` data directory
		// kept from then) is labelled, or its client could not log in.
		if secret.Labels[flexv1.CredentialsLabel] != "true" {
			secret.Labels = labels.Merge(secret.Labels, index.CredentialsLabels())
			update = true
		}
		if update {
			if err := c.Update(ctx, secret); err != nil {
				return fmt.Errorf("updating secret %s/%s: %w", org.Namespace, secretName, err)
			}
		}
	}

	apiClient := &flexv1.APIClient{
		ObjectMeta: metav1.ObjectMeta{Namespace: org.Namespace, Name: strings.ToLower(org.Username)},
		Spec: flexv1.APIClientSpec{
			Username:              org.Username,
			PasswordHashSecretRef: flexv1.SecretKeyRef{Name: secretName, Key: passwordHashKey},
			Roles:                 org.Roles,
		},
	}
	if err := c.Create(ctx, apiClient); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating API client %s/%s: %w", org.Namespace, apiClient.Name, err)
	}
	return nil
}
