package restapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func decodeBody(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseCredit(t *testing.T) {
	const id = "3f0e9b4e-1f55-4c1c-9a55-0f6f1c0a0001"
	for _, c := range []struct {
		name, body string
		problems   []string // the fields at fault, in order ("" none)
		check      func(t *testing.T, f *fields, body map[string]any)
	}{
		{name: "a full record", body: `{"transaction_id":"` + id + `","transaction_type":"flex event","credit_pence":35,
			"start_time":"2026-10-06T18:30:00+01:00","end_time":"2026-10-06T18:30:00.9Z","settlement_date":"2026-10-08","flex_kwh":-1.1004}`,
			check: func(t *testing.T, f *fields, body map[string]any) {
				tx := parseCredit(f, body)
				if tx.ID != id || tx.CreditPence != 35 || *tx.FlexWh != -1100 || tx.SettlementDate != "2026-10-08" {
					t.Errorf("%+v", tx)
				}
				if !tx.StartTime.Time.Equal(time.Date(2026, 10, 6, 17, 30, 0, 0, time.UTC)) || tx.StartTime.Location() != time.UTC {
					t.Errorf("start %v: want UTC, to the second", tx.StartTime)
				}
				if !tx.EndTime.Time.Equal(time.Date(2026, 10, 6, 18, 30, 0, 0, time.UTC)) {
					t.Errorf("end %v: want truncated to the second", tx.EndTime)
				}
			}},
		{name: "a settlement date alone", body: `{"transaction_id":"` + id + `","transaction_type":"signup bonus","credit_pence":500,"settlement_date":"2026-10-08"}`},
		{name: "a negative correction", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":-20,"settlement_date":"2026-10-08"}`},
		{name: "nothing", body: `{}`, problems: []string{"transaction_id", "transaction_type", "credit_pence"}},
		{name: "upper-case id is normalised", body: `{"transaction_id":"3F0E9B4E-1F55-4C1C-9A55-0F6F1C0A0001","transaction_type":"correction","credit_pence":1,"settlement_date":"2026-10-08"}`},
		{name: "a withdrawal", body: `{"transaction_id":"` + id + `","transaction_type":"withdrawal","credit_pence":-1,"settlement_date":"2026-10-08"}`,
			problems: []string{"transaction_type"}},
		{name: "a fraction of a penny", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":1.5,"settlement_date":"2026-10-08"}`,
			problems: []string{"credit_pence"}},
		{name: "too many pence", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":10000000000000,"settlement_date":"2026-10-08"}`,
			problems: []string{"credit_pence"}},
		{name: "a payment status", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":1,"settlement_date":"2026-10-08","payment_status":"posted"}`,
			problems: []string{"payment_status"}},
		{name: "end before start", body: `{"transaction_id":"` + id + `","transaction_type":"flex event","credit_pence":1,"start_time":"2026-10-06T18:00:00Z","end_time":"2026-10-06T17:00:00Z"}`,
			problems: []string{"end_time"}},
		{name: "a date that is not one", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":1,"settlement_date":"2026-02-30"}`,
			problems: []string{"settlement_date"}},
		{name: "no time at all", body: `{"transaction_id":"` + id + `","transaction_type":"correction","credit_pence":1}`,
			problems: []string{"start_time"}},
		{name: "flex_kwh a string", body: `{"transaction_id":"` + id + `","transaction_type":"flex event","credit_pence":1,"start_time":"2026-10-06T18:00:00Z","flex_kwh":"1"}`,
			problems: []string{"flex_kwh"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := decodeBody(t, c.body)
			f := &fields{}
			if c.check != nil {
				c.check(t, f, body)
			} else {
				parseCredit(f, body)
			}
			got := make([]string, 0, len(f.Items()))
			for _, it := range f.Items() {
				got = append(got, it.Loc[len(it.Loc)-1].(string))
			}
			if len(got) != len(c.problems) {
				t.Fatalf("problems at %v, want %v (%+v)", got, c.problems, f.Items())
			}
			for i := range got {
				if got[i] != c.problems[i] {
					t.Errorf("problem %d at %s, want %s", i, got[i], c.problems[i])
				}
			}
		})
	}
}

func TestParsePaymentStatus(t *testing.T) {
	for body, problems := range map[string]int{
		`{"payment_status":"approved"}`:            0,
		`{"payment_status":"pending_approval"}`:    1,
		`{"payment_status":"approved","note":"x"}`: 1,
		`{}`:                   1,
		`{"payment_status":3}`: 1,
	} {
		f := &fields{}
		parsePaymentStatus(f, decodeBody(t, body))
		if len(f.Items()) != problems {
			t.Errorf("%s: %+v, want %d problems", body, f.Items(), problems)
		}
	}
}
