// Package bootstrap installs what a new Flexsite installation starts from: the default
// eligibility rules (Propositions and AssetModels, from YAML a platform team can read and
// change) and, for the embedded development setup, a demo organisation with an API client.
package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// ApplyDefaults creates every object of the YAML files in dir that does not exist yet.
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
			err := c.Create(ctx, obj)
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

// EnsureOrganisation creates the organisation's namespace and API client, and (re)sets the
// client's password hash when the password no longer matches it.
func EnsureOrganisation(ctx context.Context, c client.Client, org Organisation) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: org.Namespace, Labels: map[string]string{flexv1.OrganisationLabel: org.Namespace}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
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
