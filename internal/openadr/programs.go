package openadr

import (
	"encoding/json"
	"net/http"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
)

// Payload types and units the door's events and reports speak (the Definition's enumerations).
const (
	PayloadDispatchSetpoint = "DISPATCH_SETPOINT"
	PayloadPrice            = "PRICE"
	ReportOperatingState    = "OPERATING_STATE"
	ReportUsage             = "USAGE"
	UnitsKW                 = "KW"
	UnitsKWH                = "KWH"
	UnitsWH                 = "WH"
	UnitsMWH                = "MWH"
	CurrencyGBP             = "GBP"
)

// TargetResourceName is the target type that names resources (assets, by asset_id).
const TargetResourceName = "RESOURCE_NAME"

// searchPrograms answers the propositions offered. Programs target no one: a search that
// names targets finds none.
func (d *Door) searchPrograms(r *http.Request, _ *auth.Principal) (any, error) {
	s, err := parseSearch(r)
	if err != nil {
		return nil, err
	}
	programs, err := d.VTN.Programs(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]oadr.Program, 0, len(programs))
	if s.TargetType == "" {
		for _, p := range page(programs, s) {
			out = append(out, programShape(p))
		}
	}
	return out, nil
}

func (d *Door) getProgram(r *http.Request, _ *auth.Principal) (any, error) {
	p, err := d.VTN.Program(r.Context(), r.PathValue("programID"))
	if err != nil {
		return nil, err
	}
	return programShape(p), nil
}

// programsAreDeclared answers the document's program writes: programs are Propositions, which
// the platform team declares (kubectl, GitOps); no API client writes them.
func (d *Door) programsAreDeclared(*http.Request, *auth.Principal) (any, error) {
	return nil, forbidden("Programs are the propositions the platform team declares as Proposition objects; " +
		"they are read here and written with kubectl or GitOps")
}

// programShape is a proposition as the document's program: its id and programName are the
// proposition's name; its events carry DISPATCH_SETPOINT in kW, and price_curve's PRICE in
// £/MWh as declared.
func programShape(p vtn.Program) oadr.Program {
	id := string(p.Name)
	created, modified := p.Created.UTC(), p.Modified.UTC()
	objectType := oadr.ProgramObjectTypePROGRAM
	out := oadr.Program{Id: &id, ProgramName: id, CreatedDateTime: &created, ModificationDateTime: &modified,
		ObjectType: &objectType}
	if p.Description != "" {
		out.ProgramLongName = &p.Description
	}
	descriptors := []oadr.EventPayloadDescriptor{payloadDescriptor(PayloadDispatchSetpoint, UnitsKW, "")}
	if p.Name == flexv1.PropositionPriceCurve {
		descriptors = append(descriptors, payloadDescriptor(PayloadPrice, UnitsMWH, CurrencyGBP))
	}
	items := make([]oadr.Program_PayloadDescriptors_Item, 0, len(descriptors))
	for _, desc := range descriptors {
		// Not the generated FromEventPayloadDescriptor: it sets objectType to the
		// discriminator's mapping key, which the schema's enum refuses.
		var item oadr.Program_PayloadDescriptors_Item
		if raw, err := json.Marshal(desc); err == nil && item.UnmarshalJSON(raw) == nil {
			items = append(items, item)
		}
	}
	out.PayloadDescriptors = &items
	return out
}

func payloadDescriptor(payloadType, units, currency string) oadr.EventPayloadDescriptor {
	objectType := oadr.EVENTPAYLOADDESCRIPTOR
	d := oadr.EventPayloadDescriptor{ObjectType: &objectType, PayloadType: payloadType}
	if units != "" {
		d.Units = &units
	}
	if currency != "" {
		d.Currency = &currency
	}
	return d
}
