// Package rewardspage is the door of the household's hosted rewards page: server-rendered
// HTML forms (no script), assets embedded in the binary, a strict Content-Security-Policy.
// Its routes:
//
//	GET  /hosted/rewards/link/{code}  redeem the one-time link: start a session, 303 to the page
//	GET  /hosted/rewards              the page: balance, thresholds, flex events, history, bank details, forms
//	POST /hosted/rewards/code         email a six-digit code (where 2FA is enforced)
//	POST /hosted/rewards/verify       confirm the code (field code)
//	POST /hosted/rewards/bank         enter or change bank details
//	POST /hosted/rewards/withdraw     request a withdrawal of the balance, then 303 to redirect_uri
//	POST /hosted/rewards/finish       leave, 303 to redirect_uri
//
// Every POST carries the session cookie and the form token (csrf_token); success answers 303
// back to the page (POST-redirect-GET), a problem re-renders the page with the error tied to
// its field. The use cases (the link, its session, codes, bank details, withdrawals) are
// internal/app/rewards'; this door words what they answer.
package rewardspage

import (
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/batterychart"
	"github.com/flexsite/flexsite/internal/web/flexchart"
)

//go:embed assets
var assets embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"errid": func(field string) string { return field + "-error" },
}).ParseFS(assets, "assets/page.html"))

// stylesheet is served at /hosted/rewards/style.css.
var stylesheet = func() []byte {
	b, err := assets.ReadFile("assets/style.css")
	if err != nil {
		panic(err)
	}
	return b
}()

const (
	// cookieName carries the session: the link's key, a dot, the session secret.
	cookieName = "flexsite_rewards"
	// fieldCode is the form field (and the path segment) of the emailed code.
	fieldCode = "code"
	// maxForm bounds a form's body.
	maxForm = 16 << 10
)

// Door serves the rewards page.
type Door struct {
	Log     logr.Logger
	Rewards *rewards.Service
	// Limits spend the failure budget of an address that names no live link or session.
	Limits         *web.Limiters
	TrustedProxies web.TrustedProxies
	// PublicURL is the scheme and host the page is served at (empty: the request's); a
	// session cookie over https is Secure.
	PublicURL string
	// FlexEvents finds the household's settled flex events and what its devices did in them
	// (nil: none are shown).
	FlexEvents *flexevents.Service
	// Pricing tells the household its next charging window and its battery's plan (nil: none
	// are shown).
	Pricing *pricing.Service
}

// Routes are the page's routes.
func (d *Door) Routes() []web.Route {
	return []web.Route{
		{Method: "GET", Path: "/hosted/rewards/link/{code}", Handler: d.guard(d.redeem)},
		{Method: "GET", Path: "/hosted/rewards", Handler: d.guard(d.page)},
		{Method: "POST", Path: "/hosted/rewards/code", Handler: d.guard(d.action(fieldCode))},
		{Method: "POST", Path: "/hosted/rewards/verify", Handler: d.guard(d.action("verify"))},
		{Method: "POST", Path: "/hosted/rewards/bank", Handler: d.guard(d.action("bank"))},
		{Method: "POST", Path: "/hosted/rewards/withdraw", Handler: d.guard(d.action("withdraw"))},
		{Method: "POST", Path: "/hosted/rewards/finish", Handler: d.guard(d.action("finish"))},
	}
}

// Extra are the page's files, served beside its routes.
func (d *Door) Extra() map[string]http.Handler {
	return map[string]http.Handler{"GET /hosted/rewards/style.css": http.HandlerFunc(style)}
}

// view is what the page template shows.
type view struct {
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
	FlexEvents       []flexchart.Event
	// ChargingWindows say when the household's car will charge (price_curve households).
	ChargingWindows []string
	BatteryPlans    []batterychart.Plan
	SetupFirst      bool
	TwoFactor       bool
	Verified        bool
	CodeSent        bool
	Email           string // masked
	CannotSendCode  string
	Bank            *bankView
	Values          map[string]string
	Errors          map[string]string
	Alert           string
	Flash           string
	// Message is the whole page when there is no session (a used or expired link).
	Message string
}

type transactionView struct{ Date, Description, Amount, Status string }

type bankView struct{ AccountName, SortCode, AccountNumber string }

// formAction is the source a page's last form may send the browser on to (redirect_uri's
// origin, or its private-use scheme: validation.RedirectSource), or "" when target is none.
func formAction(target string) string { return validation.RedirectSource(target) }

// setHeaders are the headers of every page answer: no caching, no referrer, a CSP that allows
// only the page's own stylesheet and forms posting to itself (and, after the last form, the
// redirect to formTarget's origin), and no framing (web.PageHeaders).
func setHeaders(w http.ResponseWriter, formTarget string) {
	action := "'self'"
	if origin := formAction(formTarget); origin != "" {
		action += " " + origin
	}
	web.PageHeaders(w, web.Page{CSP: "default-src 'none'; style-src 'self'; img-src 'self'; form-action " + action +
		"; frame-ancestors 'none'; base-uri 'none'"})
}

func (d *Door) render(w http.ResponseWriter, status int, v *view, formTarget string) {
	setHeaders(w, formTarget)
	if v.Title == "" {
		v.Title = "Your rewards"
	}
	var buf strings.Builder
	if err := pageTemplate.Execute(&buf, v); err != nil {
		d.Log.Error(err, "rendering the rewards page")
		http.Error(w, "Internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

func (d *Door) message(w http.ResponseWriter, status int, title, message string) {
	d.render(w, status, &view{Title: title, Message: message}, "")
}

func style(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(stylesheet)
}

// guard spends the failure budget of the caller's address on every request of the page that
// names no live link or session (a guessed code, a stale cookie), and answers 429 once it is
// used up, as the API does for bad tokens.
func (d *Door) guard(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		address := d.TrustedProxies.ClientAddress(r)
		if d.Limits.AuthFailures.Exhausted(address) {
			w.Header().Set(web.HeaderRetryAfter, "60")
			d.message(w, http.StatusTooManyRequests, "Too many tries", "Please wait a minute and try again.")
			return
		}
		rec := &statusOnly{ResponseWriter: w}
		h(rec, r)
		if rec.status == http.StatusNotFound || rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden {
			d.Limits.AuthFailures.Charge(address)
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

// redeem answers GET /hosted/rewards/link/{code}: a link works once.
func (d *Door) redeem(w http.ResponseWriter, r *http.Request) {
	sess, err := d.Rewards.Redeem(r.Context(), r.PathValue(fieldCode))
	switch {
	case errors.Is(err, rewards.ErrNoLink):
		d.message(w, http.StatusNotFound, "Link not found", "This link is not valid. Ask for a new one where you found it.")
		return
	case errors.Is(err, rewards.ErrLinkUsed):
		d.message(w, http.StatusGone, "Link already used", "This link has already been used. Ask for a new one where you found it.")
		return
	case errors.Is(err, rewards.ErrLinkExpired):
		d.message(w, http.StatusGone, "Link expired", "This link has expired. Ask for a new one where you found it.")
		return
	case app.As(err) != nil && app.As(err).Kind == app.Unavailable:
		d.noSession(w, err) // 503: the links' database is away
		return
	case err != nil:
		d.Log.Error(err, "redeeming a rewards link")
		d.message(w, http.StatusInternalServerError, "Something went wrong", "Please try again in a moment.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: sess.Token, Path: "/hosted/rewards",
		MaxAge: int(rewards.SessionTTL.Seconds()), HttpOnly: true, Secure: d.secure(r),
		// Lax, not Strict: the household arrives from another site (an email, the client's
		// app), and the page it is redirected to must see the cookie. Cross-site POSTs do not
		// carry it, and every form also needs the session's token.
		SameSite: http.SameSiteLaxMode,
	})
	setHeaders(w, "")
	http.Redirect(w, r, "/hosted/rewards", http.StatusSeeOther)
}

// secure: the page is served over https (its public URL's scheme, else the request's).
func (d *Door) secure(r *http.Request) bool {
	if d.PublicURL != "" {
		return strings.HasPrefix(d.PublicURL, "https://")
	}
	return r.TLS != nil
}

// session is the session a request's cookie names, or rewards.ErrNoLink.
func (d *Door) session(r *http.Request) (*rewards.Session, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, rewards.ErrNoLink
	}
	return d.Rewards.SessionOf(r.Context(), c.Value)
}

func (d *Door) noSession(w http.ResponseWriter, err error) {
	if e := app.As(err); e != nil && e.Kind == app.Unavailable {
		// The rewards database is away: the household comes back shortly, nothing was lost.
		if e.RetryAfter != "" {
			w.Header().Set("Retry-After", e.RetryAfter)
		}
		d.message(w, http.StatusServiceUnavailable, "Please try again shortly",
			"Your rewards cannot be shown or changed just now. Nothing has been lost: please try again in a minute.")
		return
	}
	if !errors.Is(err, rewards.ErrNoLink) {
		d.Log.Error(err, "reading a rewards session")
		d.message(w, http.StatusInternalServerError, "Something went wrong", "Please try again in a moment.")
		return
	}
	d.message(w, http.StatusUnauthorized, "Session ended",
		"This page is no longer open. Ask for a new link where you found the first one.")
}

// csrfToken is the forms' token for a session: an HMAC of the session secret (no storage).
func csrfToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("flexsite-rewards-csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// page answers GET /hosted/rewards.
func (d *Door) page(w http.ResponseWriter, r *http.Request) {
	sess, err := d.session(r)
	if err != nil {
		d.noSession(w, err)
		return
	}
	d.show(w, r, sess, http.StatusOK, &view{Flash: d.Rewards.TakeFlash(r.Context(), sess)})
}

// show renders the page of a session with what v already holds (errors, notices).
func (d *Door) show(w http.ResponseWriter, r *http.Request, sess *rewards.Session, status int, v *view) {
	pv, err := d.Rewards.View(r.Context(), sess)
	if err != nil {
		d.noSession(w, err)
		return
	}
	policy := d.Rewards.Policy
	v.CSRF = csrfToken(sess.Secret())
	v.Balance, v.Earnings = pounds(pv.Balance.Current), pounds(pv.Balance.Earnings)
	v.Minimum = pounds(policy.MinimumWithdrawalPence)
	v.WaitDays, v.DaysLeft = policy.WithdrawalMinWaitDays, pv.DaysLeft
	v.CanWithdraw, v.BelowMinimum = pv.CanWithdraw, pv.BelowMinimum
	v.HideTransactions = pv.HideTransactions
	if !pv.HideTransactions {
		for i := range pv.History.Len() { // the ledger is in statement order, newest first
			v.Transactions = append(v.Transactions, transactionViewOf(pv.History, i))
		}
	}
	if d.FlexEvents != nil {
		// The events are a view of the settlements: a database that does not answer leaves
		// them out rather than the page.
		if evs, err := d.FlexEvents.OfSite(r.Context(), pv.Site, time.Now()); err != nil {
			d.Log.Error(err, "reading the household's flex events")
		} else {
			v.FlexEvents = flexchart.Of(evs.Events)
		}
	}
	if d.Pricing != nil {
		// The battery's plan is a view of the prices and dispatches: a database that does not
		// answer leaves it out rather than the page.
		if plans, err := d.Pricing.BatteryPlansOfSite(r.Context(), pv.Site); err != nil {
			d.Log.Error(err, "reading the household's battery plans")
		} else {
			v.BatteryPlans = batteryPlans(plans)
		}
		// A view of the kept schedules: a database that does not answer leaves it out.
		if windows, err := d.Pricing.ChargingWindows(r.Context(), pv.Site); err != nil {
			d.Log.Error(err, "reading the household's charging windows")
		} else {
			v.ChargingWindows = windows
		}
	}
	v.SetupFirst = pv.SetupFirst
	v.TwoFactor, v.Verified = pv.TwoFactor, pv.Verified
	v.CodeSent = pv.CodeSent
	v.Email = rewards.MaskEmail(pv.Site.Spec.Email)
	switch {
	case pv.Site.Spec.Email == "":
		v.CannotSendCode = "We have no email address for your home, so we cannot send you a code. Ask your provider to add one."
	case pv.MailerMissing:
		v.CannotSendCode = "We cannot send email at the moment. Please try again later."
	}
	if bank := pv.Bank; bank != nil {
		v.Bank = &bankView{AccountName: bank.AccountName, SortCode: "**-**-" + bank.SortCode[len(bank.SortCode)-2:],
			AccountNumber: validation.MaskDigits(bank.AccountNumber)}
	}
	d.render(w, status, v, sess.RedirectURI())
}

// action handles the page's forms.
func (d *Door) action(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := d.session(r)
		if err != nil {
			d.noSession(w, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				d.show(w, r, sess, http.StatusRequestEntityTooLarge, &view{Alert: fmt.Sprintf(
					"The form was larger than %d bytes. Please try again.", maxForm)})
				return
			}
			d.show(w, r, sess, http.StatusBadRequest, &view{Alert: "The form could not be read. Please try again."})
			return
		}
		if !rewards.EqualHash(r.PostForm.Get("csrf_token"), csrfToken(sess.Secret())) {
			d.message(w, http.StatusForbidden, "Form expired", "This form has expired. Go back to the page and try again.")
			return
		}
		switch name {
		case fieldCode:
			d.sendCode(w, r, sess)
		case "verify":
			d.verify(w, r, sess)
		case "bank":
			d.bank(w, r, sess)
		case "withdraw":
			d.withdraw(w, r, sess)
		case "finish":
			d.done(w, r, sess, d.Rewards.Finish(r.Context(), sess), sess.RedirectURI())
		}
	}
}

// done answers an action that stored the session's state (err says how): 303 to target.
func (d *Door) done(w http.ResponseWriter, r *http.Request, sess *rewards.Session, err error, target string) {
	switch {
	case errors.Is(err, rewards.ErrChanged):
		d.message(w, http.StatusConflict, "Please try again", "The page changed while you were using it. Go back and try again.")
		return
	case err != nil:
		d.noSession(w, err)
		return
	}
	setHeaders(w, sess.RedirectURI())
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func (d *Door) sendCode(w http.ResponseWriter, r *http.Request, sess *rewards.Session) {
	_, err := d.Rewards.SendCode(r.Context(), sess)
	alert := map[error]string{
		rewards.ErrCodeNotNeeded:  "You do not need a code.",
		rewards.ErrCannotSendCode: "We cannot send you a code.",
		rewards.ErrTooManyCodes:   "We have sent as many codes as we can for this link. Ask for a new link.",
		rewards.ErrCodeTooSoon:    "We sent a code a moment ago. Please wait half a minute before asking for another.",
	}[err]
	switch {
	case alert != "":
		d.show(w, r, sess, http.StatusTooManyRequests, &view{Alert: alert})
	case errors.Is(err, rewards.ErrCodeNotSent):
		d.show(w, r, sess, http.StatusBadGateway, &view{Alert: "We could not send the email. Please try again in a moment."})
	default:
		d.done(w, r, sess, err, "/hosted/rewards")
	}
}

func (d *Door) verify(w http.ResponseWriter, r *http.Request, sess *rewards.Session) {
	code := strings.TrimSpace(r.PostForm.Get(fieldCode))
	refuse := func(msg string) {
		d.show(w, r, sess, http.StatusUnprocessableEntity, &view{Errors: map[string]string{fieldCode: msg}})
	}
	if !sess.Verified() && (len(code) != 6 || strings.Trim(code, "0123456789") != "") {
		refuse("Enter the 6 digits of the code we emailed you.")
		return
	}
	err := d.Rewards.Verify(r.Context(), sess, code)
	switch {
	case errors.Is(err, rewards.ErrCodeExpired):
		refuse("This code has expired. Ask for a new one.")
	case errors.Is(err, rewards.ErrCodeWrong):
		refuse("That code is not right. Check the email and try again.")
	case errors.Is(err, rewards.ErrCodeVoided):
		refuse("That code is not right, and it has now stopped working. Ask for a new one.")
	default:
		d.done(w, r, sess, err, "/hosted/rewards")
	}
}

func (d *Door) bank(w http.ResponseWriter, r *http.Request, sess *rewards.Session) {
	if sess.NeedsVerification() {
		d.show(w, r, sess, http.StatusForbidden, &view{Alert: "Confirm the code we email you before you add bank details."})
		return
	}
	form := r.PostForm
	errs := map[string]string{}
	var b rewards.BankDetails
	var err error
	if b.AccountName, err = validation.NormaliseAccountName(form.Get("account_name")); err != nil {
		errs["account_name"] = err.Error()
	}
	if b.SortCode, err = validation.NormaliseSortCode(form.Get("sort_code")); err != nil {
		errs["sort_code"] = err.Error()
	}
	if b.AccountNumber, err = validation.NormaliseAccountNumber(form.Get("account_number")); err != nil {
		errs["account_number"] = err.Error()
	}
	if len(errs) > 0 {
		// The account name and sort code are shown again; the account number is not.
		d.show(w, r, sess, http.StatusUnprocessableEntity, &view{Errors: errs,
			Values: map[string]string{"account_name": form.Get("account_name"), "sort_code": form.Get("sort_code")}})
		return
	}
	err = d.Rewards.SaveBankDetails(r.Context(), sess, b)
	switch {
	case errors.Is(err, rewards.ErrNotVerified):
		d.show(w, r, sess, http.StatusForbidden, &view{Alert: "Confirm the code we email you before you add bank details."})
	case errors.Is(err, rewards.ErrNotStored):
		d.show(w, r, sess, http.StatusInternalServerError, &view{Alert: "We could not save your bank details. Please try again."})
	default:
		d.done(w, r, sess, err, "/hosted/rewards")
	}
}

func (d *Door) withdraw(w http.ResponseWriter, r *http.Request, sess *rewards.Session) {
	err := d.Rewards.Withdraw(r.Context(), sess)
	switch {
	case errors.Is(err, rewards.ErrNoBankDetails):
		d.show(w, r, sess, http.StatusUnprocessableEntity, &view{Alert: "Add your bank details before you withdraw."})
	case errors.Is(err, household.ErrCannotWithdraw):
		d.show(w, r, sess, http.StatusUnprocessableEntity, &view{Alert: "You cannot withdraw your rewards yet."})
	case errors.Is(err, rewards.ErrNotStored):
		d.show(w, r, sess, http.StatusInternalServerError, &view{Alert: "We could not record your withdrawal. Please try again."})
	case app.As(err) != nil && app.As(err).Kind == app.Unavailable:
		d.noSession(w, err)
	default:
		d.done(w, r, sess, err, sess.RedirectURI())
	}
}

// pounds writes pence as money: £12.34, −£5.00.
func pounds(pence int64) string {
	sign := ""
	if pence < 0 {
		sign, pence = "−", -pence
	}
	return fmt.Sprintf("%s£%d.%02d", sign, pence/100, pence%100)
}

func transactionViewOf(l *ledger.Ledger, i int) transactionView {
	tx := l.At(i)
	v := transactionView{Amount: pounds(tx.CreditPence()),
		Description: household.TransactionWords(string(tx.Type()), string(tx.PaymentStatus()))}
	if at := l.Time(i); !at.IsZero() {
		v.Date = household.Day(at)
	}
	if st := tx.PaymentStatus(); st != "" {
		v.Status = strings.ReplaceAll(string(st), "_", " ")
	}
	return v
}
