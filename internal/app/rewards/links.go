package rewards

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/pagestore"
)

// The rewards link opens the hosted rewards page for one site. What the link and its session
// are lives in PostgreSQL (internal/pagestore), one row per link, so that it survives a
// restart and every replica sees it; the row holds only hashes of the secrets the household's
// browser carries:
//   - the link's one-time code (in the URL): the row's key is a prefix of its SHA-256, and the
//     full hash is compared in constant time. Redeeming it marks the link used (a write at the
//     version read: of two concurrent redemptions one wins) and starts a session;
//   - the session secret (which the page keeps in a cookie), hashed;
//   - the emailed six-digit code, hashed with the link's key, single use, expiring, with a
//     bounded number of tries and of sends.
//
// Bank details are in PostgreSQL too, sealed (internal/sealing's key ring): the manager keeps nothing of
// the rewards page in Secrets, and may read no Secret outside its own namespace and the
// organisations' (docs/platform.md).

// Rewards link lifetimes and bounds.
const (
	// LinkTTL is how long a link may be redeemed.
	LinkTTL = 15 * time.Minute
	// SessionTTL is how long the page works after the link was redeemed.
	SessionTTL = 30 * time.Minute
	// CodeTTL is how long an emailed code is good for.
	CodeTTL = 10 * time.Minute
	// codeTries is how many wrong codes void the code sent.
	codeTries = 5
	// codeSends is how many codes one link may send, and codeInterval how long it waits
	// between two.
	codeSends    = 5
	codeInterval = 30 * time.Second
)

// Refusals of the link, the session and the page's actions. The rewards page words them.
var (
	// ErrNoLink is a link or session that does not exist (or whose secret does not match).
	ErrNoLink = errors.New("no such rewards link")
	// ErrLinkUsed is a link redeemed already.
	ErrLinkUsed = errors.New("rewards link already used")
	// ErrLinkExpired is a link past its time.
	ErrLinkExpired = errors.New("rewards link expired")
	// ErrChanged is a session changed by another request meanwhile.
	ErrChanged = errors.New("the session changed meanwhile")
	// ErrCodeNotNeeded: the link needs no code, or its email is confirmed already.
	ErrCodeNotNeeded = errors.New("no code needed")
	// ErrCannotSendCode: there is no email address, or no mailer.
	ErrCannotSendCode = errors.New("cannot send a code")
	// ErrTooManyCodes: the link has sent as many codes as it may.
	ErrTooManyCodes = errors.New("too many codes sent")
	// ErrCodeTooSoon: a code was sent a moment ago.
	ErrCodeTooSoon = errors.New("a code was sent a moment ago")
	// ErrCodeNotSent: the email could not be sent (the code is stored, and may be sent again).
	ErrCodeNotSent = errors.New("the code could not be sent")
	// ErrCodeExpired: no code is pending, or it expired.
	ErrCodeExpired = errors.New("the code expired")
	// ErrCodeWrong and ErrCodeVoided: a wrong code; the latter used up the code's tries.
	ErrCodeWrong  = errors.New("wrong code")
	ErrCodeVoided = errors.New("wrong code, now void")
	// ErrNotVerified: the link enforces the emailed code, and it is not confirmed yet.
	ErrNotVerified = errors.New("the emailed code is not confirmed")
	// ErrNoBankDetails: a withdrawal needs bank details first.
	ErrNoBankDetails = errors.New("no bank details")
	// ErrNotStored: the bank details or the withdrawal could not be stored (logged; try again).
	ErrNotStored = errors.New("could not be stored")
)

// LinkRequest asks for a link to a site's rewards page.
type LinkRequest struct {
	// RedirectURI is where the household goes when it leaves, as the caller named it: IssueLink
	// checks it (app.RedirectURI) and stores it normalised.
	RedirectURI string
	// TwoFactor enforces the emailed code (nil: the API client's default).
	TwoFactor *bool
	// HideTransactions hides the history; AutoSetup asks for bank details first.
	HideTransactions, AutoSetup bool
}

// Link is a new link: its one-time code and when it stops working.
type Link struct {
	Code    string
	Expires time.Time
}

// linkState is a link's state, as its row stores it (JSON).
type linkState struct {
	LinkHash         string    `json:"link_hash"`
	Namespace        string    `json:"namespace"`
	ClientName       string    `json:"client"`
	SiteName         string    `json:"site_name"`
	SiteID           string    `json:"site_id"`
	RedirectURI      string    `json:"redirect_uri"`
	TwoFactor        bool      `json:"two_factor"`
	HideTransactions bool      `json:"hide_transactions"`
	AutoSetup        bool      `json:"auto_redirect_to_setup"`
	Expires          time.Time `json:"expires"`

	Redeemed       bool      `json:"redeemed"`
	SessionHash    string    `json:"session_hash,omitempty"`
	SessionExpires time.Time `json:"session_expires,omitzero"`
	Finished       bool      `json:"finished,omitempty"`

	Verified    bool      `json:"verified,omitempty"`
	CodeHash    string    `json:"code_hash,omitempty"`
	CodeExpires time.Time `json:"code_expires,omitzero"`
	CodeTries   int       `json:"code_tries,omitempty"`
	CodesSent   int       `json:"codes_sent,omitempty"`
	LastCodeAt  time.Time `json:"last_code_at,omitzero"`

	// Flash is a one-time notice shown by the next page view (POST-redirect-GET).
	Flash string `json:"flash,omitempty"`
}

func sha256Hex(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// linkKey is a link's row key: a prefix of its code's hash.
func linkKey(code string) string { return sha256Hex(code)[:40] }

// EqualHash compares two secrets' hashes (or tokens) in constant time; empty never matches.
func EqualHash(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// IssueLink makes a one-time link to the rewards page of the caller's site siteID.
func (s *Service) IssueLink(ctx context.Context, p *auth.Principal, siteID string, in LinkRequest) (Link, error) {
	redirect, err := app.RedirectURI(ctx, s.Cache, p, in.RedirectURI)
	if err != nil {
		return Link{}, err
	}
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return Link{}, err
	}
	twoFactor := in.TwoFactor
	if twoFactor == nil {
		apiClient := &flexv1.APIClient{}
		if err := s.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, apiClient); err != nil {
			return Link{}, err
		}
		twoFactor = &apiClient.Spec.RewardsTwoFactor
	}
	now := s.Now()
	code := rand.Text()
	link := linkState{
		LinkHash: sha256Hex(code), Namespace: site.Namespace, ClientName: p.ClientName, SiteName: site.Name,
		SiteID: site.Labels[flexv1.IDLabel], RedirectURI: redirect, TwoFactor: *twoFactor,
		HideTransactions: in.HideTransactions, AutoSetup: in.AutoSetup, Expires: now.Add(LinkTTL),
	}
	data, err := json.Marshal(link)
	if err != nil {
		return Link{}, err
	}
	if err := s.Private.CreateLink(ctx, linkKey(code), data, link.deadAfter()); err != nil {
		return Link{}, storeErr(err)
	}
	return Link{Code: code, Expires: link.Expires}, nil
}

// deadAfter is when nobody can use the link any more (the sweep deletes it then): a finished
// session at once.
func (l *linkState) deadAfter() time.Time {
	switch {
	case !l.Redeemed:
		return l.Expires
	case l.Finished:
		return time.Time{}
	}
	return l.SessionExpires
}

// storedLink is where a link's state was read from: its key and the version a write names.
type storedLink struct {
	key     string
	version int64
}

// loadLink reads a link by key from the database (a link is used right after it was made,
// perhaps on another replica).
func (s *Service) loadLink(ctx context.Context, key string) (*storedLink, *linkState, error) {
	if len(key) != 40 || strings.Trim(key, "0123456789abcdef") != "" {
		return nil, nil, ErrNoLink
	}
	row, err := s.Private.Link(ctx, key)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, ErrNoLink
	}
	if err != nil {
		return nil, nil, storeErr(err)
	}
	link := &linkState{}
	if err := json.Unmarshal(row.State, link); err != nil {
		return nil, nil, fmt.Errorf("rewards link %s: %w", key, err)
	}
	return &storedLink{key: key, version: row.Version}, link, nil
}

// saveLink writes a link's state at the version read: ErrChanged means another request of
// the same session (or a second redemption) came first.
func (s *Service) saveLink(ctx context.Context, stored *storedLink, link *linkState) error {
	data, err := json.Marshal(link)
	if err != nil {
		return err
	}
	version, err := s.Private.UpdateLink(ctx, stored.key, stored.version, data, link.deadAfter())
	if errors.Is(err, pagestore.ErrChanged) {
		return ErrChanged
	}
	if err != nil {
		return storeErr(err)
	}
	stored.version = version
	return nil
}

// Session is a redeemed link's session: what the page shows and acts on.
type Session struct {
	stored *storedLink
	link   *linkState
	// Token is the session's secret, which the household's browser carries (key.secret).
	Token string
	// raw is the secret part of Token.
	raw string
}

// Secret is the session secret (the page derives its form token from it).
func (s *Session) Secret() string { return s.raw }

// RedirectURI is where the household goes when it leaves.
func (s *Session) RedirectURI() string { return s.link.RedirectURI }

// Verified reports whether the emailed code is confirmed.
func (s *Session) Verified() bool { return s.link.Verified }

// NeedsVerification reports whether the link enforces the emailed code and it is not
// confirmed yet.
func (s *Session) NeedsVerification() bool { return s.link.TwoFactor && !s.link.Verified }

// ClientName is the API client that issued the link.
func (s *Session) ClientName() string { return s.link.ClientName }

// Redeem redeems a link's code (it works once) and opens its session.
func (s *Service) Redeem(ctx context.Context, code string) (*Session, error) {
	stored, link, err := s.loadLink(ctx, linkKey(code))
	if err == nil && !EqualHash(sha256Hex(code), link.LinkHash) {
		err = ErrNoLink
	}
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if link.Redeemed {
		return nil, ErrLinkUsed
	}
	if now.After(link.Expires) {
		return nil, ErrLinkExpired
	}
	session := rand.Text()
	link.Redeemed, link.SessionHash, link.SessionExpires = true, sha256Hex(session), now.Add(SessionTTL)
	if err := s.saveLink(ctx, stored, link); err != nil {
		if errors.Is(err, ErrChanged) {
			return nil, ErrLinkUsed
		}
		return nil, err
	}
	return &Session{stored: stored, link: link, Token: linkKey(code) + "." + session, raw: session}, nil
}

// SessionOf is the live session a browser's token names, or ErrNoLink.
func (s *Service) SessionOf(ctx context.Context, token string) (*Session, error) {
	key, session, ok := strings.Cut(token, ".")
	if !ok || session == "" {
		return nil, ErrNoLink
	}
	stored, link, err := s.loadLink(ctx, key)
	if err != nil {
		return nil, err
	}
	if !link.Redeemed || !EqualHash(sha256Hex(session), link.SessionHash) || link.Finished || s.Now().After(link.SessionExpires) {
		return nil, ErrNoLink
	}
	return &Session{stored: stored, link: link, Token: token, raw: session}, nil
}

// TakeFlash answers the session's one-time notice and forgets it.
func (s *Service) TakeFlash(ctx context.Context, sess *Session) string {
	flash := sess.link.Flash
	if flash != "" {
		sess.link.Flash = ""
		if err := s.saveLink(ctx, sess.stored, sess.link); err != nil && !errors.Is(err, ErrChanged) {
			s.Log.Error(err, "clearing a rewards page notice")
		}
	}
	return flash
}

// BankDetails are a site's bank details (stored as this JSON, sealed).
type BankDetails struct {
	AccountName   string `json:"account_name"`
	SortCode      string `json:"sort_code"`
	AccountNumber string `json:"account_number"`
}

// PageView is what the rewards page shows of a session.
type PageView struct {
	Site    *flexv1.Site
	History *ledger.Ledger
	Bank    *BankDetails
	Balance household.Balance
	// Policy's verdicts on the balance.
	DaysLeft                  int
	CanWithdraw, BelowMinimum bool
	HideTransactions          bool
	SetupFirst                bool
	TwoFactor, Verified       bool
	CodeSent                  bool
	// MailerMissing: no code can be sent from here.
	MailerMissing bool
}

// View is what the page shows of a session.
func (s *Service) View(ctx context.Context, sess *Session) (PageView, error) {
	link := sess.link
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		return PageView{}, err
	}
	var history *ledger.Ledger
	if !link.HideTransactions {
		txs, err := s.Store.All(ctx, siteKey(site))
		if err != nil {
			return PageView{}, storeErr(err)
		}
		history = ledger.New(txs)
	}
	b, err := s.keptBalance(ctx, site)
	if err != nil {
		return PageView{}, err
	}
	bank, err := s.bankDetails(ctx, site)
	if err != nil {
		return PageView{}, err
	}
	now := s.Now()
	return PageView{Site: site, History: history, Bank: bank, Balance: b,
		DaysLeft: s.Policy.DaysUntilWaitMet(b, now), CanWithdraw: s.Policy.CanWithdraw(b, now),
		BelowMinimum: s.Policy.BelowMinimum(b), HideTransactions: link.HideTransactions,
		SetupFirst: link.AutoSetup && bank == nil, TwoFactor: link.TwoFactor, Verified: link.Verified,
		CodeSent: link.CodeHash != "" && now.Before(link.CodeExpires), MailerMissing: s.Mailer == nil}, nil
}

// siteOfLink is the link's site, while it is still the site the link was made for.
func (s *Service) siteOfLink(ctx context.Context, link *linkState) (*flexv1.Site, error) {
	site := &flexv1.Site{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: link.Namespace, Name: link.SiteName}, site)
	if apierrors.IsNotFound(err) || (err == nil && (site.Labels[flexv1.IDLabel] != link.SiteID || !site.DeletionTimestamp.IsZero())) {
		return nil, ErrNoLink
	}
	return site, err
}

// SendCode emails a six-digit code to the site's address (where the link enforces it). The
// code is stored before it is sent: a code sent but not stored could never be confirmed.
func (s *Service) SendCode(ctx context.Context, sess *Session) (maskedEmail string, err error) {
	link := sess.link
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		return "", err
	}
	now := s.Now()
	switch {
	case !link.TwoFactor || link.Verified:
		return "", ErrCodeNotNeeded
	case site.Spec.Email == "" || s.Mailer == nil:
		return "", ErrCannotSendCode
	case link.CodesSent >= codeSends:
		return "", ErrTooManyCodes
	case now.Sub(link.LastCodeAt) < codeInterval:
		return "", ErrCodeTooSoon
	}
	code, err := sixDigits()
	if err != nil {
		return "", err
	}
	link.CodeHash, link.CodeExpires, link.CodeTries = sha256Hex(link.LinkHash, code), now.Add(CodeTTL), 0
	link.CodesSent, link.LastCodeAt = link.CodesSent+1, now
	if err := s.saveLink(ctx, sess.stored, link); err != nil {
		return "", err
	}
	if err := s.Mailer.Send(ctx, mail.Message{To: site.Spec.Email, Subject: "Your code to manage your rewards",
		Text: fmt.Sprintf("Your code is %s.\r\n\r\nEnter it on the rewards page to add or change your bank details. "+
			"It works once, for %d minutes.\r\n\r\nIf you did not ask for a code, you can ignore this email.\r\n",
			code, int(CodeTTL.Minutes()))}); err != nil {
		s.Log.Error(err, "sending a rewards code")
		return "", ErrCodeNotSent
	}
	masked := MaskEmail(site.Spec.Email)
	link.Flash = "We sent a code to " + masked + "."
	return masked, s.saveLink(ctx, sess.stored, link)
}

func sixDigits() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// Verify confirms the emailed code (six digits, as a door read them). A confirmed session
// needs no code: Verify then does nothing.
func (s *Service) Verify(ctx context.Context, sess *Session, code string) error {
	link := sess.link
	switch {
	case link.Verified:
		return s.saveLink(ctx, sess.stored, link)
	case link.CodeHash == "" || s.Now().After(link.CodeExpires):
		return ErrCodeExpired
	}
	if !EqualHash(sha256Hex(link.LinkHash, code), link.CodeHash) {
		link.CodeTries++
		refusal := ErrCodeWrong
		if link.CodeTries >= codeTries {
			link.CodeHash = ""
			refusal = ErrCodeVoided
		}
		if err := s.saveLink(ctx, sess.stored, link); err != nil {
			return err
		}
		return refusal
	}
	link.Verified, link.CodeHash, link.Flash = true, "", "Thank you: your email address is confirmed."
	return s.saveLink(ctx, sess.stored, link)
}

// SaveBankDetails stores the household's bank details (validated by the door with
// internal/validation), once the emailed code is confirmed where the link enforces it.
func (s *Service) SaveBankDetails(ctx context.Context, sess *Session, d BankDetails) error {
	link := sess.link
	if sess.NeedsVerification() {
		return ErrNotVerified
	}
	site, err := s.siteOfLink(ctx, link)
	if err != nil {
		return err
	}
	if err := s.storeBankDetails(ctx, site, d); err != nil {
		s.Log.Error(err, "storing bank details", "site", site.Name)
		return ErrNotStored
	}
	link.Flash = "Your bank details are saved."
	return s.saveLink(ctx, sess.stored, link)
}

// Withdraw records a withdrawal of the whole balance (household.RewardPolicy.Withdrawal) and
// ends the session.
func (s *Service) Withdraw(ctx context.Context, sess *Session) error {
	site, err := s.siteOfLink(ctx, sess.link)
	if err != nil {
		return err
	}
	bank, err := s.bankDetails(ctx, site)
	if err != nil {
		return err
	}
	if bank == nil {
		return ErrNoBankDetails
	}
	err = s.withdraw(ctx, site)
	switch {
	case errors.Is(err, household.ErrCannotWithdraw):
		return household.ErrCannotWithdraw
	case db.Unavailable(err):
		return storeErr(err)
	case err != nil:
		s.Log.Error(err, "recording a withdrawal", "site", site.Name)
		return ErrNotStored
	}
	return s.Finish(ctx, sess)
}

// Finish ends the session.
func (s *Service) Finish(ctx context.Context, sess *Session) error {
	sess.link.Finished = true
	return s.saveLink(ctx, sess.stored, sess.link)
}

// bankDetails are the site's bank details, or nil.
func (s *Service) bankDetails(ctx context.Context, site *flexv1.Site) (*BankDetails, error) {
	plaintext, err := s.Private.BankDetails(ctx, site.Namespace, site.Labels[flexv1.IDLabel])
	if err != nil || plaintext == nil {
		return nil, storeErr(err)
	}
	d := &BankDetails{}
	if err := json.Unmarshal(plaintext, d); err != nil {
		return nil, fmt.Errorf("bank details of site %s: %w", site.Name, err)
	}
	if len(d.SortCode) < 2 || d.AccountNumber == "" {
		return nil, nil
	}
	return d, nil
}

// storeBankDetails creates or replaces the site's bank details (sealed; the site controller
// forgets them when the site is deleted).
func (s *Service) storeBankDetails(ctx context.Context, site *flexv1.Site, d BankDetails) error {
	plaintext, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.Private.PutBankDetails(ctx, site.Namespace, site.Labels[flexv1.IDLabel], plaintext)
}

// MaskEmail shows enough of an address for the household to recognise it: a****@example.com.
func MaskEmail(email string) string {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" {
		return ""
	}
	first := []rune(local)[0]
	return string(first) + "****@" + domain
}
