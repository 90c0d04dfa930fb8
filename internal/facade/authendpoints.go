package facade

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/validation"
)

// UserIDAnnotation holds, on a Site created for an end user, that user's API id.
const UserIDAnnotation = "flexsite.io/user-id"

// decodeForm reads an application/x-www-form-urlencoded body as a flat object of strings,
// so the form endpoints validate with the same field readers (and 422 form) as JSON ones.
func decodeForm(r *http.Request) (map[string]any, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, invalid(field("Input should be form data (application/x-www-form-urlencoded)", "model_attributes_type", "body"))
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fail(http.StatusRequestEntityTooLarge, "Request body larger than %d bytes", maxBodyBytes)
		}
		return nil, invalid(field("Form data could not be parsed", "value_error", "body"))
	}
	return formObject(r.PostForm), nil
}

func formObject(form url.Values) map[string]any {
	obj := make(map[string]any, len(form))
	for k, v := range form {
		if len(v) > 0 {
			obj[k] = v[0]
		}
	}
	return obj
}

// TokenResponse answers POST /auth/token-form (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// tokenForm is the OAuth2 resource-owner password flow: form username, password and
// grant_type=password give an organisation token valid for an hour.
func (s *Server) tokenForm(w http.ResponseWriter, r *http.Request) {
	oauthError := func(err error, code string) error {
		var ae *apiError
		if errors.As(err, &ae) {
			withCode := *ae
			withCode.oauth = code
			return &withCode
		}
		return err
	}
	body, err := decodeForm(r)
	if err != nil {
		s.writeError(w, r, oauthError(err, "invalid_request"))
		return
	}
	f := &fields{}
	username, _ := f.str(body, []any{"body"}, "username", true)
	password, _ := f.str(body, []any{"body"}, "password", true)
	code := "invalid_request"
	if gt, ok := f.str(body, []any{"body"}, "grant_type", false); ok && gt != "password" {
		f.add("String should match pattern '^password$'", "string_pattern_mismatch", []any{"body", "grant_type"})
		code = "unsupported_grant_type"
	}
	if err := f.err(); err != nil {
		s.writeError(w, r, oauthError(err, code))
		return
	}
	// Password guessing: once a username (tried from this address) or an address has used up
	// its failures, answer 429 without checking any password. The username's budget is kept
	// per address, so that nobody elsewhere can lock an organisation out of its own login by
	// failing with its username; the address is the client's, behind trusted proxies too.
	address := s.clientAddress(r)
	userKey := username + "\x00" + address
	if s.limiter.loginUser.exhausted(userKey) || s.limiter.loginAddress.exhausted(address) {
		metrics.LoginFailures.WithLabelValues(metrics.LoginRateLimited).Inc()
		s.writeError(w, r, oauthError(s.tooManyRequests(s.limiter.loginUser, "login_failures"), "invalid_request"))
		return
	}
	p, err := s.Authenticator.Login(r.Context(), username, password)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidCredentials) || errors.Is(err, auth.ErrClientDisabled) {
			metrics.LoginFailures.WithLabelValues(metrics.LoginBadCredentials).Inc()
			s.limiter.loginUser.charge(userKey)
			s.limiter.loginAddress.charge(address)
			err = &apiError{status: http.StatusUnauthorized, detail: "Incorrect username or password", headers: bearerChallenge,
				oauth: "invalid_grant"}
		}
		s.writeError(w, r, err)
		return
	}
	token, ttl, err := s.Issuer.IssueOrganisationToken(*p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	metrics.TokensIssued.WithLabelValues(metrics.TokenOrganisation).Inc()
	// RFC 6749: token responses must not be cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, TokenResponse{AccessToken: token, TokenType: "bearer", ExpiresIn: int(ttl.Seconds())})
}

// ComponentTokenResponse answers POST /auth/component-token.
type ComponentTokenResponse struct {
	ID          string `json:"id"`
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
}

// componentToken finds or creates the end user (and the site that is theirs) by the client's
// external_user_id and returns a token for that one site, valid for 24 hours.
func (s *Server) componentToken(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeForm(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	loc := []any{"body"}
	externalUserID, _ := f.str(body, loc, "external_user_id", true)
	origin, ok := f.str(body, loc, "allowed_origin", true)
	if ok && !isOrigin(origin) {
		f.add("Input should be an origin: scheme://host[:port], e.g. https://app.example.com", "url_parsing",
			at(loc, "allowed_origin"))
	}
	email, hasEmail := f.str(body, loc, "user_email", false)
	email = strings.TrimSpace(email)
	if hasEmail && email != "" {
		if err := validation.ValidateEmail(email); err != nil {
			f.addValidation(err, at(loc, "user_email"))
		}
	}
	consent := f.consent(body, loc, false)
	if err := f.err(); err != nil {
		return nil, err
	}
	// One spelling per origin: the browser sends it without a trailing slash, in lower case.
	origin = normaliseOrigin(origin)
	ctx := r.Context()
	ns := &corev1.Namespace{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Name: p.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fail(http.StatusNotFound, "Organisation not found")
		}
		return nil, err
	}
	apiClient := &flexv1.APIClient{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, apiClient); err != nil {
		return nil, err
	}

	var site *flexv1.Site
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByExternalUser(ctx, p.Namespace, externalUserID)
		if err != nil {
			return err
		}
		if current == nil && st.cached {
			// The cache may not have seen this user's site yet: ask the API server before
			// treating them as new (a new user must send consent).
			return errRetry
		}
		if current == nil {
			if consent == nil && !apiClient.Spec.ConsentExempt {
				return invalid(field("Field required on the first call for a new external_user_id",
					"missing", "body", "gave_boundary_meter_consent_at"))
			}
			site = household.NewSite(p.Namespace, identity.SiteNameForExternalUser(externalUserID))
			site.Annotations = map[string]string{UserIDAnnotation: identity.NewID()}
			household.GrantOrigin(site, origin)
			site.Spec.ExternalUserID = externalUserID
			site.Spec.Email = email
			if consent != nil {
				site.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: consent.UTC()}
			}
			return s.create(ctx, log, site)
		}
		site = current.DeepCopy()
		in := household.SiteFields{Consent: consent}
		if hasEmail {
			in.Email = &email
		}
		changed := household.MergeSite(&site.Spec, in)
		household.EnsureID(site)
		if site.Annotations[UserIDAnnotation] == "" {
			if site.Annotations == nil {
				site.Annotations = map[string]string{}
			}
			site.Annotations[UserIDAnnotation] = identity.NewID()
			changed = append(changed, "user_id")
		}
		if household.GrantOrigin(site, origin) {
			changed = append(changed, "allowed_origin")
		}
		return s.write(ctx, log, site, current, changed)
	})
	if err != nil {
		return nil, err
	}
	// The token names the end user (its subject, which also tells a namesake site recreated
	// after an offboard from this one); the answer's id is the household's site id, which the
	// organisation uses in every later request about this user.
	token, _, err := s.Issuer.IssueEndUserToken(auth.Principal{
		Kind: auth.KindEndUser, Namespace: p.Namespace, ClientName: p.ClientName, Username: p.Username,
		SiteName: site.Name, UserID: site.Annotations[UserIDAnnotation], AllowedOrigin: origin,
	})
	if err != nil {
		return nil, err
	}
	metrics.TokensIssued.WithLabelValues(metrics.TokenEndUser).Inc()
	return ComponentTokenResponse{ID: site.Labels[flexv1.IDLabel], AccessToken: token, TokenType: "bearer"}, nil
}

// normaliseOrigin spells a valid origin as a browser's Origin header does: scheme and host in
// lower case, no trailing slash.
func normaliseOrigin(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return origin
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if port := u.Port(); (scheme == schemeHTTPS && port == "443") || (scheme == schemeHTTP && port == "80") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return scheme + "://" + host
}

// isOrigin reports whether s is a web origin: http(s)://host[:port], nothing more.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" &&
		(u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

// UserRecord answers GET /auth/users/me/.
type UserRecord struct {
	Username string        `json:"username"`
	Roles    []flexv1.Role `json:"roles"`
}

func (s *Server) usersMe(_ *http.Request, p *auth.Principal) (any, error) {
	roles := append([]flexv1.Role{}, p.Roles...)
	return UserRecord{Username: p.Username, Roles: roles}, nil
}
