// Command flexsite-admin helps a platform team manage Flexsite organisations. It prints
// Kubernetes YAML (never applies it), so its output can go to `kubectl apply -f -` or, with a
// sealed-secrets tool, into Git.
//
//	FLEXSITE_CLIENT_PASSWORD=... flexsite-admin organisation --name acme --username acme-app | kubectl apply -f -
//
// The password is read from $FLEXSITE_CLIENT_PASSWORD, or generated and printed to stderr;
// the YAML carries only its bcrypt hash.
//
// It also moves a withdrawal's payment status on, one step of its state machine at a time
// (docs/api.md, Payment status; any other change is refused, exits non-zero and records
// nothing), in Flexsite's database (recorded with who and when):
//
//	FLEXSITE_DATABASE_URL=postgres://... flexsite-admin payment-status --organisation acme \
//	    --site-id SITE_ID --transaction-id ID --status approved
//
// And it loads the meter-point register from the export the platform team's data licence
// gives it, all or nothing (docs/platform.md, "The meter register"):
//
//	FLEXSITE_DATABASE_URL=postgres://... flexsite-admin meters import register.csv.gz
//	flexsite-admin meters generate --count 1000000 | gzip > register.csv.gz   # a synthetic one
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
	flexvalidation "github.com/flexsite/flexsite/internal/validation"
)

func main() {
	if err := run(os.Args[1:], os.Getenv("FLEXSITE_CLIENT_PASSWORD"), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "flexsite-admin:", err)
		os.Exit(2)
	}
}

func run(args []string, password string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "payment-status" {
		return paymentStatus(context.Background(), args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "meters" {
		return metersCommand(context.Background(), args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "organisation" {
		return errors.New("usage: flexsite-admin organisation --name NAMESPACE --username USER " +
			"[--roles " + knownRoles() + "] [--consent-exempt] [--redirect-schemes com.example.app,...]\n" +
			"   or: " + strings.TrimPrefix(paymentUsage, "usage: ") + "\n" +
			"   or: " + strings.TrimPrefix(metersUsage, "usage: "))
	}
	fs := flag.NewFlagSet("organisation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "Organisation name: the namespace its objects live in.")
	username := fs.String("username", "", "Login name of the organisation's API client (unique across organisations).")
	roles := fs.String("roles", "entity_read,entity_write,rewards,components,flex_events_write,prices_write",
		"Comma-separated roles of the API client.")
	exempt := fs.Bool("consent-exempt", false, "Exempt the client from sending boundary meter consent for new end users.")
	schemes := fs.String("redirect-schemes", "", "Comma-separated private-use URI schemes of the organisation's mobile apps "+
		"(reverse domain names, e.g. com.example.app), which a redirect_uri may use instead of https.")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Label(*name); len(errs) > 0 {
		return fmt.Errorf("--name %q is not a valid namespace name: %s", *name, strings.Join(errs, "; "))
	}
	if *username == "" {
		return errors.New("--username is required")
	}
	clientRoles, err := parseRoles(*roles)
	if err != nil {
		return err
	}
	redirectSchemes, err := parseSchemes(*schemes)
	if err != nil {
		return err
	}
	if password == "" {
		if password, err = generatePassword(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "generated password for %s (shown once, store it now): %s\n", *username, password)
	}
	docs, err := organisationYAML(*name, *username, password, clientRoles, *exempt, redirectSchemes)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, docs)
	return err
}

func parseRoles(s string) ([]flexv1.Role, error) {
	var out []flexv1.Role
	for _, r := range strings.Split(s, ",") {
		role := flexv1.Role(strings.TrimSpace(r))
		if role == "" {
			continue
		}
		if !role.Known() {
			return nil, fmt.Errorf("unknown role %q (known: %s)", role, knownRoles())
		}
		out = append(out, role)
	}
	return out, nil
}

// parseSchemes reads --redirect-schemes: each one a scheme flexvalidation.AppScheme accepts.
func parseSchemes(s string) ([]string, error) {
	var out []string
	for _, scheme := range strings.Split(s, ",") {
		if scheme = strings.TrimSpace(scheme); scheme == "" {
			continue
		}
		if err := flexvalidation.AppScheme(scheme); err != nil {
			return nil, fmt.Errorf("--redirect-schemes %q: %w", scheme, err)
		}
		out = append(out, scheme)
	}
	return out, nil
}

func generatePassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// organisationYAML renders the organisation's Namespace, the Secret with the client's bcrypt
// password hash, and the APIClient.
func organisationYAML(name, username, password string, roles []flexv1.Role, exempt bool, schemes []string) (string, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", err
	}
	clientName := strings.ToLower(username)
	secretName := clientName + "-credentials"
	objects := []any{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{flexv1.OrganisationLabel: name}},
		},
		&corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			// The manager reads only Secrets with this label.
			ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: secretName,
				Labels: index.CredentialsLabels()},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{"password-hash": string(hash)},
		},
		&flexv1.APIClient{
			TypeMeta:   metav1.TypeMeta{APIVersion: flexv1.GroupVersion.String(), Kind: "APIClient"},
			ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: clientName},
			Spec: flexv1.APIClientSpec{
				Username:              username,
				PasswordHashSecretRef: flexv1.SecretKeyRef{Name: secretName, Key: "password-hash"},
				Roles:                 roles,
				ConsentExempt:         exempt,
				RedirectSchemes:       schemes,
			},
		},
	}
	var b strings.Builder
	for _, obj := range objects {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.String(), nil
}

// knownRoles lists every role, comma-separated, as --roles takes them.
func knownRoles() string {
	names := make([]string, len(flexv1.Roles))
	for i, r := range flexv1.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ",")
}
