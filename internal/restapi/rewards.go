package restapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/web"
)

// transactions answers a site's reward history (docs/api.md, "Reward history"): without
// limit the whole of it, as production's operation does (streamed when longer than a
// batch); with limit a page, and a Link to the next page when more follow.
func (a *API) transactions(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	q := make(url.Values, 4) // on the stack: r.URL.Query() made one a read
	web.QueryInto(q, r.URL.RawQuery)
	pg := transactionsQuery(f, q)
	if err := f.Err(); err != nil {
		return nil, err
	}
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	page, err := a.Rewards.TransactionsIn(r.Context(), p, id, pg)
	if err != nil {
		return nil, err
	}
	switch {
	case page.Streamed():
		return transactionsStream{page}, nil
	case page.More:
		q.Set("offset", strconv.Itoa(pg.Offset+pg.Limit))
		next := "<" + r.URL.EscapedPath() + "?" + q.Encode() + `>; rel="next"`
		return web.WithStatus{Headers: map[string]string{headerLink: next}, Body: transactionsPage{page}}, nil
	}
	return transactionsPage{page}, nil
}

// headerLink carries a page's link to the next one (RFC 8288, rel="next").
const headerLink = "Link"

func (a *API) rewardInfo(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Rewards.Info(r.Context(), p, id)
}

// BalanceURLResponse answers GET /rewards/{site_id}/url/balance.
type BalanceURLResponse struct {
	BalanceWithdrawalURL string `json:"balance_withdrawal_url"`
	URLExpiryTimestamp   string `json:"url_expiry_timestamp"`
}

// balanceURL answers a one-time link to the hosted rewards page of the site.
func (a *API) balanceURL(r *http.Request, p *auth.Principal) (any, error) {
	q := r.URL.Query()
	f := &fields{}
	redirect := q.Get("redirect_uri")
	if redirect == "" {
		f.Add("Field required", "missing", []any{"query", "redirect_uri"})
	}
	twoFactor := queryBool(f, q, "enforce_two_factor_auth")
	hide := queryBool(f, q, "hide_transactions")
	auto := queryBool(f, q, "auto_redirect_to_setup")
	if err := f.Err(); err != nil {
		return nil, err
	}
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	link, err := a.Rewards.IssueLink(r.Context(), p, id, rewards.LinkRequest{RedirectURI: redirect, TwoFactor: twoFactor,
		HideTransactions: hide != nil && *hide, AutoSetup: auto != nil && *auto})
	if err != nil {
		return nil, err
	}
	return BalanceURLResponse{
		BalanceWithdrawalURL: PublicBase(a.PublicURL, r) + "/hosted/rewards/link/" + link.Code,
		URLExpiryTimestamp:   link.Expires.UTC().Format(time.RFC3339),
	}, nil
}

// PublicBase is the scheme and host links point at: publicURL, else the request's.
func PublicBase(publicURL string, r *http.Request) string { return web.PublicBase(publicURL, r) }
