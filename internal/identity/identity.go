// Package identity derives object names from natural keys and hands out API identifiers.
//
// Names come from the natural key (a site's MPAN, an asset's external id, site+proposition for
// an enrolment) so that the API server itself rejects a duplicate created concurrently
// (AlreadyExists) and every lookup by key is a GET, not a scan. The UUIDs the REST API hands
// out are kept in the flexsite.io/id label: stable for the life of the object and carried by
// any backup that recreates objects from YAML (metadata.uid is not).
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// maxName is the longest object name the API server accepts (DNS subdomain).
const maxName = 253

// NewID returns a fresh API identifier.
func NewID() string { return uuid.NewString() }

// SiteNameForMPAN names the Site of a meter point.
func SiteNameForMPAN(mpan string) string { return "mpan-" + mpan }

// MPANClaimName names the MPANClaim that reserves a meter point (the same string as the Site
// name it reserves, in another kind).
func MPANClaimName(mpan string) string { return SiteNameForMPAN(mpan) }

// SiteNameForMovedMPAN names a new Site for an MPAN whose own name, mpan-<MPAN>, is still taken
// by another site: one that has since moved to another meter point, or one still being
// deleted (its household onboarded again at once). suffix tells such sites apart (the
// caller passes something unique, e.g. a fresh id); the new site holds its MPAN by a claim.
func SiteNameForMovedMPAN(mpan, suffix string) string {
	return SiteNameForMPAN(mpan) + "-" + digest(suffix, 8)
}

// SiteNameForExternalUser names the Site created on demand for an end user of the component
// token flow. The external user id is the API client's, so it is hashed, not trusted as a name.
func SiteNameForExternalUser(externalUserID string) string {
	return "user-" + digest(externalUserID, 20)
}

// AssetName names an Asset from its external id: a readable slug of it plus a digest, so two
// ids that slug alike ("EV_1" and "ev-1") still get different names.
func AssetName(externalID string) string {
	return "asset-" + slug(externalID, 40) + digest(externalID, 12)
}

// EnrolmentName names the Enrolment of a site in a proposition.
func EnrolmentName(siteName string, p flexv1.PropositionName) string {
	name := siteName + "." + PropositionObjectName(p)
	if len(name) > maxName {
		name = "site-" + digest(siteName, 20) + "." + PropositionObjectName(p)
	}
	return name
}

// EnrolmentClaimName names the EnrolmentClaim that reserves a site's enrolment in a
// proposition: the name of the enrolment the API would make (EnrolmentName), whatever the
// holding Enrolment's own name.
func EnrolmentClaimName(siteName string, p flexv1.PropositionName) string {
	return EnrolmentName(siteName, p)
}

// UsernameClaimName names the cluster-scoped UsernameClaim that reserves an API client's
// username. Usernames allow characters object names do not (upper case, '_', '@'), and the
// claim must tell "Acme" from "acme" as login does, so the name is the username's full digest.
func UsernameClaimName(username string) string {
	return "username-" + digest(username, sha256.Size*2)
}

// RewardLedgerName names the RewardLedger of a site: one ledger per site, named after it.
func RewardLedgerName(siteName string) string { return siteName }

// PropositionObjectName is the object name of a Proposition (underscores are not allowed in names).
// The known propositions' names are made once: the hot reads derive an Enrolment's name on
// every request.
func PropositionObjectName(p flexv1.PropositionName) string {
	if name, ok := knownPropositionNames[p]; ok {
		return name
	}
	return propositionObjectName(p)
}

func propositionObjectName(p flexv1.PropositionName) string {
	return strings.ReplaceAll(string(p), "_", "-")
}

var knownPropositionNames = func() map[flexv1.PropositionName]string {
	m := make(map[flexv1.PropositionName]string, len(flexv1.AllPropositions))
	for _, p := range flexv1.AllPropositions {
		m[p] = propositionObjectName(p)
	}
	return m
}()

// slug keeps the name-safe characters of s, lower-cased, at most n of them, ending in '-'
// (or empty when nothing is left).
func slug(s string, n int) string {
	var b strings.Builder
	lastDash := true
	for _, r := range strings.ToLower(s) {
		if b.Len() >= n {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastDash = false
		case !lastDash:
			b.WriteByte('-')
			lastDash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		return ""
	}
	return out + "-"
}

func digest(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// DeviceConnectionName names the DeviceConnection of a site at a provider (one per pair).
func DeviceConnectionName(siteName, provider string) string {
	name := siteName + "." + provider
	if len(name) > maxName-len(deviceTokensPrefix) {
		name = "site-" + digest(siteName, 20) + "." + provider
	}
	return name
}

const deviceTokensPrefix = "device-tokens."

// DeviceTokensSecretName names the Secret that holds a DeviceConnection's tokens.
func DeviceTokensSecretName(connectionName string) string { return deviceTokensPrefix + connectionName }
