// Package assetevents holds the use cases of what the devices tell Flexsite
// (docs/api.md, "Asset events: what the devices tell Flexsite"): prod's asset events (plug in, plug
// out, an intent, charge now and its deletion, a tariff) about an organisation's asset, kept
// append-only in PostgreSQL (internal/asseteventstore), and the asset's latest intent. Dispatch
// reads the latest plug and charge-now state to skip an asset; the schedules read the intent
// and the tariff. It speaks no HTTP.
package assetevents

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/go-logr/logr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/validation"
)

// ChargingMode is prod's ChargingMode.
type ChargingMode string

// The charging modes.
const (
	MaximiseChargingTime ChargingMode = "maximise_charging_time"
	MinimiseChargingTime ChargingMode = "minimise_charging_time"
)

// ChargingModes lists the modes prod accepts.
var ChargingModes = []ChargingMode{MaximiseChargingTime, MinimiseChargingTime}

// TariffType is prod's TariffType.
type TariffType string

// TariffTypes lists the tariff types prod accepts.
var TariffTypes = []TariffType{"single_rate", "dual_rate", "dynamic", "smart", "unknown"}

// Type is an asset event's type (the store's): the doors name it through this package.
type Type = asseteventstore.Type

// The asset event types.
const (
	PlugIn           = asseteventstore.PlugIn
	PlugOut          = asseteventstore.PlugOut
	IntentUpdate     = asseteventstore.IntentUpdate
	ChargeNow        = asseteventstore.ChargeNow
	ChargeNowDeleted = asseteventstore.ChargeNowDeleted
	TariffUpdate     = asseteventstore.TariffUpdate
)

// EventTypes are prod's AssetEventType: what the generic event route takes (a tariff has its
// own route).
var EventTypes = []Type{PlugIn, PlugOut, IntentUpdate, ChargeNow, ChargeNowDeleted}

// Intent is prod's Intent, as stored and answered: ready_by as the client wrote it,
// ready_by_local_time as HH:MM:SS, the defaults filled in.
type Intent struct {
	EnergyRequiredKWh float64 `json:"energy_required_kwh"`
	// ReadyBy is prod's deprecated date-time, with its zone as every date-time the API takes
	// (only its wall time is used).
	ReadyBy          string       `json:"ready_by"`
	ReadyByLocalTime string       `json:"ready_by_local_time,omitempty"`
	EnergyEstimated  *bool        `json:"energy_estimated,omitempty"`
	MayChargePeak    bool         `json:"may_charge_peak"`
	ChargingMode     ChargingMode `json:"charging_mode"`
}

// Vehicle is prod's Vehicle.
type Vehicle struct {
	ChargingRateKW float64 `json:"charging_rate_kw"`
}

// Tariff is prod's Tariff. OffPeakTimes and Timezone are checked by Record (400 when outside
// the subset: validation.ParseOffPeakTimes, validation.CheckTimezone).
type Tariff struct {
	OffPeakTimes string     `json:"off_peak_times"`
	Timezone     string     `json:"timezone"`
	TariffType   TariffType `json:"tariff_type,omitempty"`
}

// Event is one asset event as the door read it: its type and the parts its request carried.
type Event struct {
	Type    Type
	Intent  *Intent
	Vehicle *Vehicle
	Tariff  *Tariff
	// EndAt is a charge-now's end (required for charge_now).
	EndAt *time.Time
}

// Recorded answers a recorded event (prod's answer is an empty schema; this is Flexsite's).
type Recorded struct {
	AssetID    string    `json:"asset_id"`
	EventType  string    `json:"event_type"`
	ReceivedAt time.Time `json:"received_at"`
}

// IntentResponse is prod's IntentResponse: the latest intent and when it was received.
type IntentResponse struct {
	Intent     json.RawMessage `json:"intent"`
	ReceivedAt time.Time       `json:"received_at"`
}

// ErrIntentNotFound answers an asset that never told an intent (prod's 404).
var ErrIntentNotFound = app.Fail(app.NotFound, "Intent not found or not authorized")

// ErrDatabaseUnavailable answers an event the database could not take now: nothing is kept;
// the client sends it again.
var ErrDatabaseUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The asset events store is unavailable; nothing was stored, retry", RetryAfter: db.RetryAfterSeconds}

// Service runs the asset events' use cases.
type Service struct {
	Log logr.Logger
	// Households finds the caller's assets (the cache first, then the API server).
	Households *app.Service
	Store      *asseteventstore.Store
	Now        func() time.Time
}

// New builds the use cases on the household use cases and the asset events' store.
func New(households *app.Service, store *asseteventstore.Store) *Service {
	if store == nil || store.Pool == nil {
		panic("assetevents.New: the asset events' store is required")
	}
	now := households.Now
	if now == nil {
		now = time.Now
	}
	return &Service{Log: households.Log.WithName("assetevents"), Households: households, Store: store, Now: now}
}

// Record keeps an event about the caller's asset assetID (an API id): 404 for an asset the
// organisation does not have (another organisation's is told alike), 422 for a plug, intent
// or charge-now event about an asset that is no charger or EV, or a charge-now without its
// end, 400 for a tariff outside prod's off_peak_times subset or with an unknown zone, 503 when
// the database cannot take it (nothing kept).
func (s *Service) Record(ctx context.Context, p *auth.Principal, assetID string, ev Event) (Recorded, error) {
	asset, err := s.asset(ctx, p, assetID)
	if err != nil {
		return Recorded{}, err
	}
	if ev.Type != asseteventstore.TariffUpdate && !dispatch.PlugEvents(asset.Spec.Type) {
		return Recorded{}, app.InvalidFields(app.Field(
			"A "+string(ev.Type)+" event applies to a charger or an electric_vehicle only; this asset is a "+
				string(asset.Spec.Type), "asset_type", "path", "asset_id"))
	}
	if ev.Type == asseteventstore.ChargeNow && ev.EndAt == nil {
		return Recorded{}, app.InvalidFields(app.Field("Field required", "missing", "body", "end_at"))
	}
	if ev.Tariff != nil {
		if err := CheckTariff(*ev.Tariff); err != nil {
			return Recorded{}, err
		}
	}
	// To the microsecond, as PostgreSQL keeps it: the answer's received_at is the one GET
	// …/intent tells later.
	stored := asseteventstore.Event{AssetID: assetID, Type: ev.Type, ReceivedAt: s.Now().UTC().Truncate(time.Microsecond),
		RecordedBy: p.ClientName, EndAt: ev.EndAt}
	if stored.Intent, err = marshalIf(ev.Intent); err == nil {
		if stored.Vehicle, err = marshalIf(ev.Vehicle); err == nil {
			stored.Tariff, err = marshalIf(ev.Tariff)
		}
	}
	if err != nil {
		return Recorded{}, err
	}
	if err := s.Store.Append(ctx, p.Namespace, stored); err != nil {
		return Recorded{}, s.failed(err)
	}
	return Recorded{AssetID: assetID, EventType: string(ev.Type), ReceivedAt: stored.ReceivedAt}, nil
}

// CheckTariff refuses a tariff outside prod's rules (400, prod's code): off_peak_times in the
// opening_hours subset, timezone an IANA zone.
func CheckTariff(t Tariff) error {
	if _, err := validation.ParseOffPeakTimes(t.OffPeakTimes); err != nil {
		return app.Fail(app.BadRequest, "Invalid tariff off_peak_times: %s", err.Error())
	}
	if err := validation.CheckTimezone(t.Timezone); err != nil {
		return app.Fail(app.BadRequest, "Invalid tariff timezone: %s", err.Error())
	}
	return nil
}

// LatestIntent answers the latest intent of the caller's asset assetID, with when it was
// received: 404 for an asset the organisation does not have or one that never told one.
func (s *Service) LatestIntent(ctx context.Context, p *auth.Principal, assetID string) (IntentResponse, error) {
	if _, err := s.asset(ctx, p, assetID); err != nil {
		if errors.Is(err, app.ErrAssetNotFound) {
			return IntentResponse{}, ErrIntentNotFound
		}
		return IntentResponse{}, err
	}
	latest, err := s.Store.Latest(ctx, p.Namespace, []string{assetID})
	if err != nil {
		return IntentResponse{}, s.failed(err)
	}
	l, ok := latest[assetID]
	if !ok || len(l.Intent) == 0 {
		return IntentResponse{}, ErrIntentNotFound
	}
	return IntentResponse{Intent: l.Intent, ReceivedAt: l.IntentAt.UTC()}, nil
}

// asset finds the organisation's live asset with API id id (app.Service.FindAsset: the
// cache, else the API server).
func (s *Service) asset(ctx context.Context, p *auth.Principal, id string) (*flexv1.Asset, error) {
	if p == nil || p.Kind != auth.KindOrganisation {
		return nil, app.Fail(app.Forbidden, "Asset events are sent with an organisation's token")
	}
	return s.Households.FindAsset(ctx, p, id, false)
}

// failed is a database error as the caller is told it: unavailable (try again), or internal.
func (s *Service) failed(err error) error {
	if db.Unavailable(err) {
		s.Log.Info("asset events: the database is unavailable", "error", err.Error())
		return ErrDatabaseUnavailable
	}
	return err
}

func marshalIf[T any](v *T) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
