package auth

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/testenv"
)

const password = "correct horse battery staple"

// authFixture is an authenticator reading a real cache of the test API server.
type authFixture struct {
	t     *testing.T
	auth  *Authenticator
	cache cache.Cache
}

func newAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	e := needEnv(t)
	ctx := t.Context()
	opts := index.CacheOptions() // as the manager's: no Secret
	opts.Scheme = testenv.Scheme
	c, err := cache.New(e.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }() // stops when the test's context is cancelled
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return &authFixture{t: t, auth: NewAuthenticator(c, e.Client), cache: c}
}

// organisation creates an organisation with one API client the way the embedded setup does,
// and waits until the cache has the client. It returns the namespace and the username.
func (f *authFixture) organisation(roles ...flexv1.Role) (string, string) {
	f.t.Helper()
	ns := newNamespace(f.t)
	username := ns + "-app"
	err := bootstrap.EnsureOrganisation(f.t.Context(), env.Client,
		bootstrap.Organisation{Namespace: ns, Username: username, Password: password, Roles: roles})
	if err != nil {
		f.t.Fatal(err)
	}
	f.waitForClient(username, 1)
	return ns, username
}

// Which password hash Secret apiClient makes.
const (
	noSecret         = iota
	labelledSecret   // as bootstrap and flexsite-admin make it
	unlabelledSecret // without flexsite.io/credentials: "true"
)

// apiClient creates an API client in ns with its own MinCost password hash Secret, as secret says.
func (f *authFixture) apiClient(ns, name, username string, secret int) {
	f.t.Helper()
	ctx := f.t.Context()
	if secret != noSecret {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			f.t.Fatal(err)
		}
		obj := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-credentials"},
			Data:       map[string][]byte{"password-hash": hash},
		}
		if secret == labelledSecret {
			obj.Labels = index.CredentialsLabels()
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			f.t.Fatal(err)
		}
	}
	c := &flexv1.APIClient{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.APIClientSpec{
			Username:              username,
			PasswordHashSecretRef: flexv1.SecretKeyRef{Name: name + "-credentials"},
			Roles:                 []flexv1.Role{flexv1.RoleEntityRead},
		},
	}
	if err := env.Client.Create(ctx, c); err != nil {
		f.t.Fatal(err)
	}
}

// waitForClient waits until the cache holds n API clients named username.
func (f *authFixture) waitForClient(username string, n int) {
	f.t.Helper()
	eventually(f.t, func() error {
		var list flexv1.APIClientList
		if err := f.cache.List(f.t.Context(), &list, client.MatchingFields{index.Username: username}); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("cache holds %d API clients %s, want %d", len(list.Items), username, n)
		}
		return nil
	})
}

// setDisabled disables or re-enables the API client of ns and waits until the cache has it.
func (f *authFixture) setDisabled(ns, name string, disabled bool) {
	f.t.Helper()
	c := &flexv1.APIClient{}
	if err := env.Client.Get(f.t.Context(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		f.t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Disabled = disabled
	if err := env.Client.Patch(f.t.Context(), c, patch); err != nil {
		f.t.Fatal(err)
	}
	eventually(f.t, func() error {
		got := &flexv1.APIClient{}
		if err := f.cache.Get(f.t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		if got.Spec.Disabled != disabled {
			return fmt.Errorf("cache has disabled=%v, want %v", got.Spec.Disabled, disabled)
		}
		return nil
	})
}

func TestLogin(t *testing.T) {
	f := newAuthFixture(t)
	roles := []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleRewards}
	ns, username := f.organisation(roles...)

	t.Run("good credentials", func(t *testing.T) {
		p, err := f.auth.Login(t.Context(), username, password)
		if err != nil {
			t.Fatal(err)
		}
		want := &Principal{Kind: KindOrganisation, Namespace: ns, ClientName: username, Username: username, Roles: roles}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("Login() = %+v, want %+v", p, want)
		}
	})

	for _, tc := range []struct{ name, username, password string }{
		{"wrong password", username, "wrong"},
		{"empty password", username, ""},
		{"password of another case", username, "Correct horse battery staple"},
		{"unknown username", "nobody-" + ns, password},
		{"empty username", "", password},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := f.auth.Login(t.Context(), tc.username, tc.password); !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("Login() = %+v, %v; want ErrInvalidCredentials", p, err)
			}
		})
	}

	t.Run("disabled client", func(t *testing.T) {
		ns, username := f.organisation(flexv1.RoleEntityRead)
		f.setDisabled(ns, username, true)
		if _, err := f.auth.Login(t.Context(), username, password); !errors.Is(err, ErrClientDisabled) {
			t.Errorf("Login(disabled client) = %v, want ErrClientDisabled", err)
		}
		// Without the password nobody learns that the client exists and is disabled.
		if _, err := f.auth.Login(t.Context(), username, "wrong"); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("Login(disabled client, wrong password) = %v, want ErrInvalidCredentials", err)
		}
		f.setDisabled(ns, username, false)
		if _, err := f.auth.Login(t.Context(), username, password); err != nil {
			t.Errorf("Login(re-enabled client) = %v", err)
		}
	})

	// Stored before the admission webhook existed (this suite installs none): neither
	// organisation logs in, with the answer of a bad password, and the log says why without
	// the password.
	t.Run("username in two organisations", func(t *testing.T) {
		_, username := f.organisation(flexv1.RoleEntityRead)
		ns2 := newNamespace(t)
		f.apiClient(ns2, "impostor", username, labelledSecret)
		f.waitForClient(username, 2)
		var logged strings.Builder
		ctx := logr.NewContext(t.Context(), funcr.New(func(prefix, args string) {
			fmt.Fprintln(&logged, prefix, args)
		}, funcr.Options{}))
		for _, pw := range []string{password, "wrong"} {
			if p, err := f.auth.Login(ctx, username, pw); !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("Login(duplicate username) = %+v, %v; want ErrInvalidCredentials", p, err)
			}
		}
		if out := logged.String(); !strings.Contains(out, "more than one API client") || !strings.Contains(out, username) {
			t.Errorf("the shared username was not logged: %q", out)
		} else if strings.Contains(out, password) {
			t.Errorf("the log holds the password: %q", out)
		}
	})

	t.Run("password hash secret missing", func(t *testing.T) {
		ns := newNamespace(t)
		username := ns + "-nohash"
		f.apiClient(ns, username, username, noSecret)
		f.waitForClient(username, 1)
		if _, err := f.auth.Login(t.Context(), username, password); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("Login(no hash secret) = %v, want ErrInvalidCredentials", err)
		}
	})

	// The manager reads no Secret without the credentials label: one named as a client's
	// hash Secret, holding the right hash, logs nobody in.
	t.Run("password hash secret without the credentials label", func(t *testing.T) {
		ns := newNamespace(t)
		username := ns + "-unlabelled"
		f.apiClient(ns, username, username, unlabelledSecret)
		f.waitForClient(username, 1)
		if _, err := f.auth.Login(t.Context(), username, password); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("Login(unlabelled hash secret) = %v, want ErrInvalidCredentials", err)
		}
	})

	// Nothing of the Secret is kept: each login reads it by name (a namespaced GET), so a
	// password changed a moment ago is the one that works, at once.
	t.Run("password hash secret read at each login", func(t *testing.T) {
		ns, username := f.organisation(flexv1.RoleEntityRead)
		if _, err := f.auth.Login(t.Context(), username, password); err != nil {
			t.Fatalf("Login() = %v", err)
		}
		if err := bootstrap.EnsureOrganisation(t.Context(), env.Client,
			bootstrap.Organisation{Namespace: ns, Username: username, Password: "a new password", Roles: []flexv1.Role{flexv1.RoleEntityRead}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.auth.Login(t.Context(), username, "a new password"); err != nil {
			t.Errorf("Login(new password, right after the change) = %v", err)
		}
		if _, err := f.auth.Login(t.Context(), username, password); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("Login(old password) = %v, want ErrInvalidCredentials", err)
		}
	})
}

func TestClientActive(t *testing.T) {
	f := newAuthFixture(t)
	ns, username := f.organisation(flexv1.RoleEntityRead)
	p, err := f.auth.Login(t.Context(), username, password)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.auth.ClientActive(t.Context(), p); err != nil || got != p {
		t.Fatalf("ClientActive(enabled client) = %v, %v; want the principal itself", got, err)
	}

	// A role the client no longer holds is left out of the answer; the principal itself (the
	// verified-token cache's shared copy) keeps it.
	lostRole := *p
	lostRole.Roles = []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}
	trimmed, err := f.auth.ClientActive(t.Context(), &lostRole)
	if err != nil {
		t.Fatalf("ClientActive(token with a role taken away) = %v", err)
	}
	if !slices.Equal(trimmed.Roles, []flexv1.Role{flexv1.RoleEntityRead}) {
		t.Errorf("roles served = %v, want only %s", trimmed.Roles, flexv1.RoleEntityRead)
	}
	if !slices.Equal(lostRole.Roles, []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}) {
		t.Errorf("the principal passed in was changed: roles %v", lostRole.Roles)
	}

	// An end-user token obtained by the client lives and dies with it too.
	endUser := &Principal{Kind: KindEndUser, Namespace: ns, ClientName: p.ClientName, Username: username, SiteName: "s", UserID: "u",
		AllowedOrigin: "https://app.example.com"}
	renamed := *p
	renamed.Username = "someone-else"
	for _, tc := range []struct {
		name string
		p    *Principal
		want error
	}{
		{"end user of the client", endUser, nil},
		{"another username", &renamed, ErrClientDisabled},
		{"unknown client", &Principal{Kind: KindOrganisation, Namespace: ns, ClientName: "ghost", Username: "ghost"}, ErrClientDisabled},
		{"unknown namespace", &Principal{Kind: KindOrganisation, Namespace: "no-such-org", ClientName: p.ClientName, Username: username},
			ErrClientDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.auth.ClientActive(t.Context(), tc.p); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("ClientActive() = %v, want %v", err, tc.want)
			}
		})
	}

	f.setDisabled(ns, p.ClientName, true)
	for _, principal := range []*Principal{p, endUser} {
		if _, err := f.auth.ClientActive(t.Context(), principal); !errors.Is(err, ErrClientDisabled) {
			t.Errorf("ClientActive(%s of disabled client) = %v, want ErrClientDisabled", principal.Kind, err)
		}
	}

	f.setDisabled(ns, p.ClientName, false)
	if _, err := f.auth.ClientActive(t.Context(), p); err != nil {
		t.Fatalf("ClientActive(re-enabled client) = %v", err)
	}
	if err := env.Client.Delete(t.Context(), &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.ClientName}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if _, err := f.auth.ClientActive(t.Context(), p); !errors.Is(err, ErrClientDisabled) {
			return fmt.Errorf("ClientActive(deleted client) = %v, want ErrClientDisabled", err)
		}
		return nil
	})
}
