package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/deviceauth"
)

// handoverTimeout bounds each statement on the token hand-over: it must not hold up the store
// in the Secret, which comes next.
const handoverTimeout = 3 * time.Second

// handOver keeps the tokens a provider answered in PostgreSQL, sealed with the claim's key,
// before they are stored in the Secret: if the API server fails that store and the process
// dies before a retry succeeds, the next refresh of the connection finds them there instead
// of using a refresh token the provider has rotated away. Best effort: the Secret is the
// store; when the database fails, only the hand-over is missing.
func (r *DeviceConnectionReconciler) handOver(ctx context.Context, conn *flexv1.DeviceConnection, claimed *corev1.Secret,
	t deviceauth.Tokens) {
	key := claimed.Data[deviceauth.KeyHandoverKey]
	if key == nil {
		return
	}
	sealed, err := deviceauth.SealTokens(key, string(conn.UID), string(claimed.Data[deviceauth.KeyRefreshToken]), t)
	if err == nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoverTimeout)
		_, err = r.DB.Exec(hctx, `INSERT INTO device_token_handovers (connection_uid, sealed) VALUES ($1, $2)
			ON CONFLICT (connection_uid) DO UPDATE SET sealed = EXCLUDED.sealed, created_at = now()`, string(conn.UID), sealed)
		cancel()
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("could not hand the new tokens over through the database; storing them in the Secret only",
			"reason", err.Error())
	}
}

// handedOver answers the tokens an earlier refresh of conn handed over and did not store in
// the Secret (sec still holds that refresh's claim and key, and the refresh token they
// replace: not a grant the household gave again since), or false.
func (r *DeviceConnectionReconciler) handedOver(ctx context.Context, conn *flexv1.DeviceConnection,
	sec *corev1.Secret) (deviceauth.Tokens, bool) {
	key := sec.Data[deviceauth.KeyHandoverKey]
	if key == nil {
		return deviceauth.Tokens{}, false
	}
	hctx, cancel := context.WithTimeout(ctx, handoverTimeout)
	defer cancel()
	var sealed []byte
	err := r.DB.QueryRow(hctx, `SELECT sealed FROM device_token_handovers WHERE connection_uid = $1`, string(conn.UID)).Scan(&sealed)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			ctrl.LoggerFrom(ctx).Info("could not read the token hand-over", "reason", err.Error())
		}
		return deviceauth.Tokens{}, false
	}
	t, replaces, err := deviceauth.OpenTokens(key, string(conn.UID), sealed)
	if err != nil || replaces != string(sec.Data[deviceauth.KeyRefreshToken]) {
		// Sealed under another claim's key (an older refresh's, already stored), or for a
		// grant the household has replaced.
		return deviceauth.Tokens{}, false
	}
	return t, true
}

// forgetHandover deletes conn's hand-over once the Secret holds its tokens (or the connection
// goes). Best effort: a row left behind no longer opens (its key left the Secret with the
// claim) and the next refresh replaces it.
func (r *DeviceConnectionReconciler) forgetHandover(ctx context.Context, conn *flexv1.DeviceConnection) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoverTimeout)
	defer cancel()
	_, _ = r.DB.Exec(hctx, `DELETE FROM device_token_handovers WHERE connection_uid = $1`, string(conn.UID))
}
