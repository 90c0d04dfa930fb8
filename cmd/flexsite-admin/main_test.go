package main

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestOrganisationYAML(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"organisation", "--name", "acme", "--username", "acme-app", "--roles", "entity_read,rewards",
		"--redirect-schemes", "com.acme.app, com.acme.rewards"},
		"s3cret-password", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret-password") {
		t.Fatal("the password must never appear in the output")
	}
	docs := strings.Split(strings.TrimPrefix(out.String(), "---\n"), "---\n")
	if len(docs) != 3 {
		t.Fatalf("want 3 documents, got %d", len(docs))
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal([]byte(docs[1]), &secret); err != nil {
		t.Fatal(err)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(secret.StringData["password-hash"]), []byte("s3cret-password")); err != nil {
		t.Fatalf("the secret must hold a bcrypt hash of the password: %v", err)
	}
	if secret.Labels[flexv1.CredentialsLabel] != "true" {
		t.Fatalf("the secret must carry the label the manager reads credentials by, got %v", secret.Labels)
	}
	var client flexv1.APIClient
	if err := yaml.Unmarshal([]byte(docs[2]), &client); err != nil {
		t.Fatal(err)
	}
	if client.Namespace != "acme" || client.Spec.Username != "acme-app" ||
		client.Spec.PasswordHashSecretRef.Name != secret.Name || len(client.Spec.Roles) != 2 ||
		strings.Join(client.Spec.RedirectSchemes, ",") != "com.acme.app,com.acme.rewards" {
		t.Fatalf("unexpected API client: %+v", client)
	}
}

func TestGeneratesAPasswordWhenNoneIsGiven(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"organisation", "--name", "acme", "--username", "u"}, "", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "generated password") {
		t.Fatalf("the generated password is told on stderr, got %q", errOut.String())
	}
}

func TestRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"organisation", "--name", "Not_A_Namespace", "--username", "u"},
		{"organisation", "--name", "acme"},
		{"organisation", "--name", "acme", "--username", "u", "--roles", "admin"},
		{"organisation", "--name", "acme", "--username", "u", "--redirect-schemes", "https"},
		{"organisation", "--name", "acme", "--username", "u", "--redirect-schemes", "com.acme.app:/cb"},
	} {
		var out, errOut bytes.Buffer
		if err := run(args, "pw", &out, &errOut); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}
