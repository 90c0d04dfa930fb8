package facade

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"math/big"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kretry "k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/validation"
)

// The hosted rewards page: server-rendered HTML forms (no script), assets embedded in the
// binary, a strict Content-Security-Policy. Its routes:
//   GET  /hosted/rewards/link/{code}  redeem the one-time link: start a session, 303 to the page
//   GET  /hosted/rewards              the page: balance, thresholds, history, bank details, forms
//   POST /hosted/rewards/code         email a six-digit code (where 2FA is enforced)
//   POST /hosted/rewards/verify       confirm the code (field code)
//   POST /hosted/rewards/bank         enter or change bank details
//   POST /hosted/rewards/withdraw     request a withdrawal of the balance, then 303 to redirect_uri
//   POST /hosted/rewards/finish       leave, 303 to redirect_uri
// Every POST carries the session cookie and the form token (csrf_token); success answers 303
// back to the page (POST-redirect-GET), a problem re-renders the page with the error tied to
// its field.

//go:embed rewardspage
var rewardsAssets embed.FS

var rewardsTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"errid": func(field string) string { return field + "-error" },
}).ParseFS(rewardsAssets, "rewardspage/page.html"))

// rewardsStylesheet is served at /hosted/rewards/style.css.
var rewardsStylesheet = func() []byte {
	b, err := rewardsAssets.ReadFile("rewardspage/style.css")
	if err != nil {
		panic(err)
	}
	return b
}()

// rewardsView is what the page template shows.
type rewardsView struct {
	Title            string
	CSRF             string
	Balance          string
	Earnings         string
	Minimum          string
	WaitDays         int
	DaysLeft         int
	CanWithdraw      bool
	BelowMinimum     bool
	HideTransactions bool
	Transactions     []transactionView
	SetupFirst       bool
	TwoFactor        bool
	Verified         bool
	CodeSent         bool
	Email            string // masked
	CannotSendCode   string
	Bank             *bankView
	Values           map[string]string
	Errors           map[string]string
	Alert            string
	Flash            string
	// Message is the whole page when there is no session (a used or expired link).
	Message string
}

type transactionView struct{ Date, Description, Amount, Status string }

type bankView struct{ AccountName, SortCode, AccountNumber string }

// setPageHeaders are the headers of every rewards page answer: no caching, no referrer, a
// CSP that allows only the page's own stylesheet and forms posting to itself (and, after
// the last form, the redirect to formTarget's origin), and no framing.
func setPageHeaders(w http.ResponseWriter, formTarget string) {
	formAction := "'self'"
	if u, ok := parseRedirectURI(formTarget); ok {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action "+formAction+
		"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
}

func (s *Server) renderRewards(w http.ResponseWriter, status int, view *rewardsView, formTarget string) {
	setPageHeaders(w, formTarget)
	if view.Title == "" {
		view.Title = "Your rewards"
	}
	var buf strings.Builder
	if err := rewardsTemplate.Execute(&buf, view); err != nil {
		s.Log.Error(err, "rendering the rewards page")
		http.Error(w, "Internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

func (s *Server) rewardsMessage(w http.ResponseWriter, status int, title, message string) {
	s.renderRewards(w, status, &rewardsView{Title: title, Message: message}, "")
}

func (s *Server) rewardsStyle(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(rewardsStylesheet)
}

// pageGuard spends the failure budget of the caller's address on every request of the page
// that names no live link or session (a guessed code, a stale cookie), and answers 429 once
// it is used up, as the API does for bad tokens.
func (s *Server) pageGuard(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		address := s.clientAddress(r)
		if s.limiter.authFailures.exhausted(address) {
			w.Header().Set(headerRetryAfter, "60")
			s.rewardsMessage(w, http.StatusTooManyRequests, "Too many tries", "Please wait a minute and try again.")
			return
		}
		rec := &statusOnly{ResponseWriter: w}
		h(rec, r)
		if rec.status == http.StatusNotFound || rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden {
			s.limiter.authFailures.charge(address)
		}
	})
}

// statusOnly remembers the status a handler answered.
type statusOnly struct {
	http.ResponseWriter
	status int
}

func (s *statusOnly) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// rewardsRedeem answers GET /hosted/rewards/link/{code}: a link works once.
func (s *Server) rewardsRedeem(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue(fieldCode)
	ctx := r.Context()
	secret, link, err := s.loadLink(ctx, linkKey(code))
	if err == nil && !equalHash(sha256Hex(code), link.LinkHash) {
		err = errNoLink
	}
	switch {
	case errors.Is(err, errNoLink):
		s.rewardsMessage(w, http.StatusNotFound, "Link not found", "This link is not valid. Ask for a new one where you found it.")
		return
	case err != nil:
		s.Log.Error(err, "reading a rewards link")
		s.rewardsMessage(w, http.StatusInternalServerError, "Something went wrong", "Please try again in a moment.")
		return
	}
	now := s.Now()
	if link.Redeemed {
		s.rewardsMessage(w, http.StatusGone, "Link already used", "This link has already been used. Ask for a new one where you found it.")
		return
	}
	if now.After(link.Expires) {
		s.rewardsMessage(w, http.StatusGone, "Link expired", "This link has expired. Ask for a new one where you found it.")
		return
	}
	session := rand.Text()
	link.Redeemed, link.SessionHash, link.SessionExpires = true, sha256Hex(session), now.Add(RewardsSessionTTL)
	if err := s.saveLink(ctx, secret, link); err != nil {
		if apierrors.IsConflict(err) {
			s.rewardsMessage(w, http.StatusGone, "Link already used", "This link has already been used. Ask for a new one where you found it.")
			return
		}
		s.Log.Error(err, "redeeming a rewards link")
		s.rewardsMessage(w, http.StatusInternalServerError, "Something went wrong", "Please try again in a moment.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: rewardsCookie, Value: linkKey(code) + "." + session, Path: "/hosted/rewards",
		MaxAge: int(RewardsSessionTTL.Seconds()), HttpOnly: true, Secure: strings.HasPrefix(s.publicBase(r), "https://"),
		// Lax, not Strict: the household arrives from another site (an email, the client's
		// app), and the page it is redirected to must see the cookie. Cross-site POSTs do not
		// carry it, and every form also needs the session's token.
		SameSite: http.SameSiteLaxMode,
	})
	setPageHeaders(w, "")
	http.Redirect(w, r, "/hosted/rewards", http.StatusSeeOther)
}

// rewardsSession is the session a request's cookie names, or errNoLink.
type rewardsSession struct {
	secret  *corev1.Secret
	link    *rewardsLink
	session string
}

func (s *Server) rewardsSessionOf(r *http.Request) (*rewardsSession, error) {
	c, err := r.Cookie(rewardsCookie)
	if err != nil {
		return nil, errNoLink
	}
	key, session, ok := strings.Cut(c.Value, ".")
	if !ok || session == "" {
		return nil, errNoLink
	}
	secret, link, err := s.loadLink(r.Context(), key)
	if err != nil {
		return nil, err
	}
	if !link.Redeemed || !equalHash(sha256Hex(session), link.SessionHash) || link.Finished || s.Now().After(link.SessionExpires) {
		return nil, errNoLink
	}
	return &rewardsSession{secret: secret, link: link, session: session}, nil
}

func (s *Server) noSession(w http.ResponseWriter, err error) {
	if !errors.Is(err, errNoLink) {
		s.Log.Error(err, "reading a rewards session")
		s.rewardsMessage(w, http.StatusInternalServerError, "Something went wrong", "Please try again in a moment.")
		return
	}
	s.rewardsMessage(w, http.StatusUnauthorized, "Session ended",
		"This page is no longer open. Ask for a new link where you found the first one.")
}

// rewardsPage answers GET /hosted/rewards.
func (s *Server) rewardsPage(w http.ResponseWriter, r *http.Request) {
	sess, err := s.rewardsSessionOf(r)
	if err != nil {
		s.noSession(w, err)
		return
	}
	flash := sess.link.Flash
	if flash != "" {
		sess.link.Flash = ""
		if err := s.saveLink(r.Context(), sess.secret, sess.link); err != nil && !apierrors.IsConflict(err) {
			s.Log.Error(err, "clearing a rewards page notice")
		}
	}
	s.showRewards(w, r, sess, http.StatusOK, &rewardsView{Flash: flash})
}

// showRewards renders the page of a session with what view already holds (errors, notices).
func (s *Server) showRewards(w http.ResponseWriter, r *http.Request, sess *rewardsSession, status int, view *rewardsView) {
	ctx := r.Context()
	link := sess.link
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		s.noSession(w, err)
		return
	}
	history, err := s.ledgerOf(ctx, site)
	if err != nil {
		s.noSession(w, err)
		return
	}
	bank, err := s.bankDetails(ctx, site)
	if err != nil {
		s.noSession(w, err)
		return
	}
	var b household.Balance
	if history != nil {
		b = history.Balance
	}
	now := s.Now()
	view.CSRF = csrfToken(sess.session)
	view.Balance, view.Earnings = pounds(b.Current), pounds(b.Earnings)
	view.Minimum = pounds(s.Rewards.MinimumWithdrawalPence)
	view.WaitDays, view.DaysLeft = s.Rewards.WithdrawalMinWaitDays, s.Rewards.DaysUntilWaitMet(b, now)
	view.CanWithdraw, view.BelowMinimum = s.Rewards.CanWithdraw(b, now), s.Rewards.BelowMinimum(b)
	view.HideTransactions = link.HideTransactions
	if !link.HideTransactions {
		for i := range history.Len() { // the ledger is in statement order, newest first
			view.Transactions = append(view.Transactions, transactionViewOf(history, i))
		}
	}
	view.SetupFirst = link.AutoSetup && bank == nil
	view.TwoFactor, view.Verified = link.TwoFactor, link.Verified
	view.CodeSent = link.CodeHash != "" && now.Before(link.CodeExpires)
	view.Email = maskEmail(site.Spec.Email)
	switch {
	case site.Spec.Email == "":
		view.CannotSendCode = "We have no email address for your home, so we cannot send you a code. Ask your provider to add one."
	case s.Mailer == nil:
		view.CannotSendCode = "We cannot send email at the moment. Please try again later."
	}
	if bank != nil {
		view.Bank = &bankView{AccountName: bank.AccountName, SortCode: "**-**-" + bank.SortCode[len(bank.SortCode)-2:],
			AccountNumber: validation.MaskDigits(bank.AccountNumber)}
	}
	s.renderRewards(w, status, view, link.RedirectURI)
}

// siteOfLink is the link's site, while it is still the site the link was made for.
func (s *Server) siteOfLink(ctx context.Context, link *rewardsLink) (*flexv1.Site, error) {
	site := &flexv1.Site{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: link.Namespace, Name: link.SiteName}, site)
	if apierrors.IsNotFound(err) || (err == nil && (site.Labels[flexv1.IDLabel] != link.SiteID || !site.DeletionTimestamp.IsZero())) {
		return nil, errNoLink
	}
	return site, err
}

// bankDetailsOf is a site's bank details as its Secret holds them.
type bankDetailsOf struct{ AccountName, SortCode, AccountNumber string }

func bankSecretKey(site *flexv1.Site) client.ObjectKey {
	return client.ObjectKey{Namespace: site.Namespace, Name: BankDetailsSecretPrefix + site.Labels[flexv1.IDLabel]}
}

// bankSecret is the site's bank details Secret, or nil. It is found by listing with its label
// (the manager may list Secrets, not get them), from the API server (the manager's cache
// holds no Secrets but the credentials).
func (s *Server) bankSecret(ctx context.Context, site *flexv1.Site) (*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := s.APIReader.List(ctx, list, client.InNamespace(site.Namespace),
		client.MatchingLabels{BankDetailsLabel: site.Labels[flexv1.IDLabel]}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == bankSecretKey(site).Name {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func (s *Server) bankDetails(ctx context.Context, site *flexv1.Site) (*bankDetailsOf, error) {
	secret, err := s.bankSecret(ctx, site)
	if err != nil || secret == nil {
		return nil, err
	}
	d := &bankDetailsOf{AccountName: string(secret.Data["account_name"]), SortCode: string(secret.Data["sort_code"]),
		AccountNumber: string(secret.Data["account_number"])}
	if len(d.SortCode) < 2 || d.AccountNumber == "" {
		return nil, nil
	}
	return d, nil
}

// storeBankDetails creates or replaces the site's bank details Secret (owned by the Site, so
// it goes with it).
func (s *Server) storeBankDetails(ctx context.Context, site *flexv1.Site, d bankDetailsOf, owner client.FieldOwner) error {
	data := map[string][]byte{"account_name": []byte(d.AccountName), "sort_code": []byte(d.SortCode),
		"account_number": []byte(d.AccountNumber)}
	key := bankSecretKey(site)
	return kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		secret, err := s.bankSecret(ctx, site)
		if err != nil {
			return err
		}
		if secret == nil {
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels: map[string]string{BankDetailsLabel: site.Labels[flexv1.IDLabel]},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "Site",
						Name: site.Name, UID: site.UID}}},
				Type: corev1.SecretTypeOpaque, Data: data,
			}
			err := s.Client.Create(ctx, secret, owner)
			if apierrors.IsAlreadyExists(err) {
				// Made a moment ago by another request: read it again and update it.
				return apierrors.NewConflict(corev1.Resource("secrets"), key.Name, err)
			}
			return err
		}
		secret.Data = data
		return s.Client.Update(ctx, secret, owner)
	})
}

// rewardsAction handles the page's forms.
func (s *Server) rewardsAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.rewardsSessionOf(r)
		if err != nil {
			s.noSession(w, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			s.showRewards(w, r, sess, http.StatusBadRequest, &rewardsView{Alert: "The form could not be read. Please try again."})
			return
		}
		if !equalHash(r.PostForm.Get("csrf_token"), csrfToken(sess.session)) {
			s.rewardsMessage(w, http.StatusForbidden, "Form expired", "This form has expired. Go back to the page and try again.")
			return
		}
		owner := client.FieldOwner(FieldManagerPrefix + sess.link.ClientName + "/rewards-page")
		switch action {
		case fieldCode:
			s.rewardsSendCode(w, r, sess)
		case "verify":
			s.rewardsVerify(w, r, sess)
		case "bank":
			s.rewardsBank(w, r, sess, owner)
		case "withdraw":
			s.rewardsWithdraw(w, r, sess, owner)
		case "finish":
			sess.link.Finished = true
			s.saveAndGo(w, r, sess, sess.link.RedirectURI)
		}
	}
}

// saveAndGo stores the session's state and answers 303 to target.
func (s *Server) saveAndGo(w http.ResponseWriter, r *http.Request, sess *rewardsSession, target string) {
	if err := s.saveLink(r.Context(), sess.secret, sess.link); err != nil {
		if apierrors.IsConflict(err) {
			s.rewardsMessage(w, http.StatusConflict, "Please try again", "The page changed while you were using it. Go back and try again.")
			return
		}
		s.noSession(w, err)
		return
	}
	setPageHeaders(w, sess.link.RedirectURI)
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func (s *Server) rewardsSendCode(w http.ResponseWriter, r *http.Request, sess *rewardsSession) {
	link := sess.link
	ctx := r.Context()
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		s.noSession(w, err)
		return
	}
	now := s.Now()
	alert := ""
	switch {
	case !link.TwoFactor || link.Verified:
		alert = "You do not need a code."
	case site.Spec.Email == "" || s.Mailer == nil:
		alert = "We cannot send you a code."
	case link.CodesSent >= rewardsCodeSends:
		alert = "We have sent as many codes as we can for this link. Ask for a new link."
	case now.Sub(link.LastCodeAt) < rewardsCodeInterval:
		alert = "We sent a code a moment ago. Please wait half a minute before asking for another."
	}
	if alert != "" {
		s.showRewards(w, r, sess, http.StatusTooManyRequests, &rewardsView{Alert: alert})
		return
	}
	code, err := sixDigits()
	if err != nil {
		s.noSession(w, err)
		return
	}
	link.CodeHash, link.CodeExpires, link.CodeTries = sha256Hex(link.LinkHash, code), now.Add(RewardsCodeTTL), 0
	link.CodesSent, link.LastCodeAt = link.CodesSent+1, now
	// Stored first: a code that was sent but not stored could never be confirmed.
	if err := s.saveLink(ctx, sess.secret, link); err != nil {
		s.noSession(w, err)
		return
	}
	if err := s.Mailer.Send(ctx, mail.Message{To: site.Spec.Email, Subject: "Your code to manage your rewards",
		Text: fmt.Sprintf("Your code is %s.\r\n\r\nEnter it on the rewards page to add or change your bank details. "+
			"It works once, for %d minutes.\r\n\r\nIf you did not ask for a code, you can ignore this email.\r\n",
			code, int(RewardsCodeTTL.Minutes()))}); err != nil {
		s.Log.Error(err, "sending a rewards code")
		s.showRewards(w, r, sess, http.StatusBadGateway, &rewardsView{Alert: "We could not send the email. Please try again in a moment."})
		return
	}
	link.Flash = "We sent a code to " + maskEmail(site.Spec.Email) + "."
	s.saveAndGo(w, r, sess, "/hosted/rewards")
}

func sixDigits() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

func (s *Server) rewardsVerify(w http.ResponseWriter, r *http.Request, sess *rewardsSession) {
	link := sess.link
	code := strings.TrimSpace(r.PostForm.Get(fieldCode))
	fail := func(msg string) {
		s.showRewards(w, r, sess, http.StatusUnprocessableEntity, &rewardsView{Errors: map[string]string{fieldCode: msg}})
	}
	switch {
	case link.Verified:
		s.saveAndGo(w, r, sess, "/hosted/rewards")
		return
	case len(code) != 6 || strings.Trim(code, "0123456789") != "":
		fail("Enter the 6 digits of the code we emailed you.")
		return
	case link.CodeHash == "" || s.Now().After(link.CodeExpires):
		fail("This code has expired. Ask for a new one.")
		return
	}
	if !equalHash(sha256Hex(link.LinkHash, code), link.CodeHash) {
		link.CodeTries++
		msg := "That code is not right. Check the email and try again."
		if link.CodeTries >= rewardsCodeTries {
			link.CodeHash = ""
			msg = "That code is not right, and it has now stopped working. Ask for a new one."
		}
		if err := s.saveLink(r.Context(), sess.secret, link); err != nil {
			s.noSession(w, err)
			return
		}
		fail(msg)
		return
	}
	link.Verified, link.CodeHash, link.Flash = true, "", "Thank you: your email address is confirmed."
	s.saveAndGo(w, r, sess, "/hosted/rewards")
}

func (s *Server) rewardsBank(w http.ResponseWriter, r *http.Request, sess *rewardsSession, owner client.FieldOwner) {
	link := sess.link
	if link.TwoFactor && !link.Verified {
		s.showRewards(w, r, sess, http.StatusForbidden, &rewardsView{Alert: "Confirm the code we email you before you add bank details."})
		return
	}
	form := r.PostForm
	errs := map[string]string{}
	var d bankDetailsOf
	var err error
	if d.AccountName, err = validation.NormaliseAccountName(form.Get("account_name")); err != nil {
		errs["account_name"] = err.Error()
	}
	if d.SortCode, err = validation.NormaliseSortCode(form.Get("sort_code")); err != nil {
		errs["sort_code"] = err.Error()
	}
	if d.AccountNumber, err = validation.NormaliseAccountNumber(form.Get("account_number")); err != nil {
		errs["account_number"] = err.Error()
	}
	if len(errs) > 0 {
		// The account name and sort code are shown again; the account number is not.
		s.showRewards(w, r, sess, http.StatusUnprocessableEntity, &rewardsView{Errors: errs,
			Values: map[string]string{"account_name": form.Get("account_name"), "sort_code": form.Get("sort_code")}})
		return
	}
	ctx := r.Context()
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		s.noSession(w, err)
		return
	}
	if err := s.storeBankDetails(ctx, site, d, owner); err != nil {
		s.Log.Error(err, "storing bank details", "site", site.Name)
		s.showRewards(w, r, sess, http.StatusInternalServerError, &rewardsView{Alert: "We could not save your bank details. Please try again."})
		return
	}
	link.Flash = "Your bank details are saved."
	s.saveAndGo(w, r, sess, "/hosted/rewards")
}

func (s *Server) rewardsWithdraw(w http.ResponseWriter, r *http.Request, sess *rewardsSession, owner client.FieldOwner) {
	ctx := r.Context()
	site, err := s.siteOfLink(ctx, sess.link)
	if err != nil {
		s.noSession(w, err)
		return
	}
	bank, err := s.bankDetails(ctx, site)
	if err != nil {
		s.noSession(w, err)
		return
	}
	if bank == nil {
		s.showRewards(w, r, sess, http.StatusUnprocessableEntity, &rewardsView{Alert: "Add your bank details before you withdraw."})
		return
	}
	err = kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		ledger := &flexv1.RewardLedger{}
		key := client.ObjectKey{Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}
		if err := s.APIReader.Get(ctx, key, ledger); err != nil {
			if apierrors.IsNotFound(err) {
				return household.ErrCannotWithdraw // nothing earned yet
			}
			return err
		}
		tx, err := s.Rewards.Withdrawal(ledger.Spec.Transactions, s.Now(), identity.NewID())
		if err != nil {
			return err
		}
		ledger.Spec.Transactions = append(ledger.Spec.Transactions, tx)
		return s.Client.Update(ctx, ledger, owner)
	})
	switch {
	case errors.Is(err, household.ErrCannotWithdraw):
		s.showRewards(w, r, sess, http.StatusUnprocessableEntity, &rewardsView{Alert: "You cannot withdraw your rewards yet."})
		return
	case err != nil:
		s.Log.Error(err, "recording a withdrawal", "site", site.Name)
		s.showRewards(w, r, sess, http.StatusInternalServerError, &rewardsView{Alert: "We could not record your withdrawal. Please try again."})
		return
	}
	sess.link.Finished = true
	s.saveAndGo(w, r, sess, sess.link.RedirectURI)
}

// pounds writes pence as money: £12.34, −£5.00.
func pounds(pence int64) string {
	sign := ""
	if pence < 0 {
		sign, pence = "−", -pence
	}
	return fmt.Sprintf("%s£%d.%02d", sign, pence/100, pence%100)
}

var transactionNames = map[flexv1.TransactionType]string{
	"flex period": "Flexibility reward (month)", "flex period top-up": "Flexibility reward top-up",
	"flex event": "Flexibility event reward", "withdrawal": "Withdrawal", "invoice paid": "Invoice paid",
	"goodwill credit": "Goodwill credit", "signup bonus": "Sign-up bonus", "correction": "Correction",
}

func transactionViewOf(l *ledger.Ledger, i int) transactionView {
	tx := l.At(i)
	v := transactionView{Amount: pounds(tx.CreditPence()), Description: transactionNames[tx.Type()]}
	if v.Description == "" {
		v.Description = string(tx.Type())
	}
	if at := l.Time(i); !at.IsZero() {
		v.Date = at.UTC().Format("2 January 2006")
	}
	if st := tx.PaymentStatus(); st != "" {
		v.Status = strings.ReplaceAll(string(st), "_", " ")
	}
	return v
}

// maskEmail shows enough of an address for the household to recognise it: a****@example.com.
func maskEmail(email string) string {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" {
		return ""
	}
	first := []rune(local)[0]
	return string(first) + "****@" + domain
}
