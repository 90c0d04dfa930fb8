package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/tenancy"
)

// defaultPasswordHashKey is the Secret key of the hash when the APIClient leaves it empty
// (the CRD defaults it too; this covers objects written before the default existed).
const defaultPasswordHashKey = "password-hash"

// dummyHash is compared against when there is no real hash to compare against (unknown
// username), so that a login takes as long whether or not the username exists. Its cost is
// bcrypt.DefaultCost, the cost the real hashes are made with; the password it hashes is
// random and unknown.
var dummyHash = []byte("$2a$10$mTnB2T.6zdlk4RpfAT5gzuzFBSxiPeoIIRI/XOTYgY5gBwyN7C3xG")

// Authenticator checks API client credentials.
//
// The password hashes live in Secrets of the organisations' namespaces, labelled
// flexsite.io/credentials: "true" (index.CredentialSecrets). A login reads the one Secret its
// API client names with a namespaced GET from the API server, and keeps nothing of it: the
// manager watches no Secret, and may get Secrets only in its own namespace and in the
// organisations' (the RoleBinding each organisation's bootstrap makes, bootstrap.
// OrganisationAccess). Token requests are rate limited per client address, so this GET is too.
// The label is checked, so that an APIClient naming another Secret of its namespace (a
// subscription's signing secret) logs nobody in.
type Authenticator struct {
	cache client.Reader
	api   client.Reader
	// clients is the store of cache's APIClient informer (nil when cache has none): read
	// there, ClientActive, which runs on every request, copies nothing.
	clients toolscache.Indexer
}

// NewAuthenticator returns an authenticator that finds API clients in cache (which must have
// the index.Username index) and reads their credential Secrets from api, a reader of the API
// server.
func NewAuthenticator(cache, api client.Reader) *Authenticator {
	return &Authenticator{cache: cache, api: api, clients: index.StoreOf(cache, &flexv1.APIClient{})}
}

// Login checks a username and password and returns the organisation principal they log in
// as. It returns ErrInvalidCredentials for an unknown username and for a wrong password
// alike, and ErrClientDisabled for a disabled client, but only once the password was right:
// without the password nobody learns that a client exists, let alone that it is disabled.
func (a *Authenticator) Login(ctx context.Context, username, password string) (*Principal, error) {
	found, err := index.NewLookup(a.cache).APIClientsByUsername(ctx, username)
	if err != nil {
		return nil, fmt.Errorf("looking up API client: %w", err)
	}
	clients := make([]flexv1.APIClient, len(found))
	for i, c := range found {
		clients[i] = *c // shallow: read only
	}
	apiClient, holders := tenancy.Owner(clients, username)
	if apiClient == nil {
		if holders > 1 {
			// Stored before the admission webhook existed, or while it was not installed: an
			// operator must rename or delete all but one. The same answer as a bad password,
			// so the caller learns nothing of other organisations' clients.
			logf.FromContext(ctx).Info("refusing login: username is used by more than one API client",
				"username", username, "count", holders)
		}
		checkPassword(nil, password)
		return nil, ErrInvalidCredentials
	}

	hash, err := a.passwordHash(ctx, apiClient)
	if err != nil {
		return nil, err
	}
	if !checkPassword(hash, password) {
		return nil, ErrInvalidCredentials
	}
	if apiClient.Spec.Disabled {
		return nil, ErrClientDisabled
	}
	return &Principal{
		Kind:       KindOrganisation,
		Namespace:  apiClient.Namespace,
		ClientName: apiClient.Name,
		Username:   apiClient.Spec.Username,
		Roles:      append([]flexv1.Role(nil), apiClient.Spec.Roles...),
	}, nil
}

// checkPassword compares password with hash, or with dummyHash when hash is nil, so that every
// login attempt costs one bcrypt comparison whatever happens to fail.
func checkPassword(hash []byte, password string) bool {
	if hash == nil {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
}

// passwordHash reads the client's bcrypt hash; nil if there is none. A missing Secret or key,
// or a Secret without the credentials label, is a misconfigured client that nobody can log in
// to: the caller sees bad credentials, the log says what is wrong.
func (a *Authenticator) passwordHash(ctx context.Context, apiClient *flexv1.APIClient) ([]byte, error) {
	ref := apiClient.Spec.PasswordHashSecretRef
	dataKey := ref.Key
	if dataKey == "" {
		dataKey = defaultPasswordHashKey
	}
	secret, err := a.credentials(ctx, client.ObjectKey{Namespace: apiClient.Namespace, Name: ref.Name})
	if err != nil {
		return nil, fmt.Errorf("reading password hash of API client %s/%s: %w", apiClient.Namespace, apiClient.Name, err)
	}
	if secret != nil && len(secret.Data[dataKey]) > 0 {
		return secret.Data[dataKey], nil
	}
	logf.FromContext(ctx).Info("API client has no password hash (a Secret labelled "+flexv1.CredentialsLabel+
		"=true with the key); refusing login",
		"namespace", apiClient.Namespace, "apiClient", apiClient.Name, "secret", ref.Name, "key", dataKey)
	return nil, nil
}

// credentials reads the credential Secret key from the API server: nil when there is no such
// Secret carrying the credentials label.
func (a *Authenticator) credentials(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := a.api.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !index.CredentialSecrets.Matches(labels.Set(secret.Labels)) {
		return nil, nil
	}
	return secret, nil
}

// ClientActive tells whether the API client that obtained p's token still exists and is
// enabled: ErrClientDisabled if not. It reads the cache, so it is cheap enough to run on
// every request, which is what makes disabling a client revoke its tokens at once.
//
// It answers the principal to serve the request as: p itself, or, when the client has lost
// some of p's roles since the token was issued, a copy without them. p is not changed (it
// may be the verified-token cache's shared copy).
func (a *Authenticator) ClientActive(ctx context.Context, p *Principal) (*Principal, error) {
	apiClient, err := a.cachedClient(ctx, p.Namespace, p.ClientName)
	if err != nil {
		return nil, fmt.Errorf("looking up API client: %w", err)
	}
	// A client deleted and recreated under the same name for another username is not the
	// client the token was issued to; a client being deleted no longer holds its username
	// (tenancy.Holders).
	if apiClient == nil || apiClient.Spec.Disabled || apiClient.Spec.Username != p.Username ||
		!apiClient.DeletionTimestamp.IsZero() {
		return nil, ErrClientDisabled
	}
	// An organisation token holds only the roles its client still holds: taking a role away
	// takes effect at once, not when the token expires.
	lost := func(r flexv1.Role) bool { return !slices.Contains(apiClient.Spec.Roles, r) }
	if p.Kind == KindOrganisation && slices.ContainsFunc(p.Roles, lost) {
		trimmed := *p
		trimmed.Roles = slices.DeleteFunc(slices.Clone(p.Roles), lost)
		return &trimmed, nil
	}
	return p, nil
}

// cachedClient is the cached APIClient ns/name, shared and only read here (nil when there is
// none). Without the informer's store, a cache Get without a deep copy.
func (a *Authenticator) cachedClient(ctx context.Context, ns, name string) (*flexv1.APIClient, error) {
	if a.clients != nil {
		obj, exists, err := a.clients.GetByKey(ns + "/" + name)
		if err != nil || !exists {
			return nil, err
		}
		c, ok := obj.(*flexv1.APIClient)
		if !ok {
			return nil, fmt.Errorf("cached object of type %T is not an APIClient", obj)
		}
		return c, nil
	}
	c := &flexv1.APIClient{}
	err := a.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c, client.UnsafeDisableDeepCopy)
	switch {
	case err == nil: // first: IsNotFound(nil) allocates
		return c, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, err
	}
}

// IsAuthError tells whether err is one of the errors that mean "not authenticated" (401)
// rather than a failure of the server (500).
func IsAuthError(err error) bool {
	return errors.Is(err, ErrInvalidCredentials) || errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrClientDisabled)
}
