package oadrtest_test

import (
	"testing"

	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
)

func TestCheckSchemaNotification(t *testing.T) {
	c, err := oadrtest.Load("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	event := `{"objectType": "EVENT", "programID": "limited_pause", "intervalPeriod": {"start": "2026-12-02T17:30:00Z", "duration": "PT30M"},
		"intervals": [{"id": 0, "payloads": [{"type": "DISPATCH_SETPOINT", "values": [0]}]}]}`
	if err := c.CheckSchema("notification", []byte(`{"objectType": "EVENT", "operation": "POST", "object": `+event+`}`)); err != nil {
		t.Errorf("the document's notification, refused: %v", err)
	}
	for name, body := range map[string]string{
		"an operation the document does not list": `{"objectType": "EVENT", "operation": "CREATE", "object": ` + event + `}`,
		"an event without intervals":              `{"objectType": "EVENT", "operation": "POST", "object": {"objectType": "EVENT", "programID": "limited_pause"}}`,
		"a duration that is not ISO 8601":         `{"objectType": "EVENT", "operation": "POST", "object": {"objectType": "EVENT", "programID": "p", "intervalPeriod": {"start": "2026-12-02T17:30:00Z", "duration": "30m"}, "intervals": []}}`,
		"not JSON":                                `{`,
	} {
		if err := c.CheckSchema("notification", []byte(body)); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	if err := c.CheckSchema("no-such-schema", []byte(`{}`)); err == nil {
		t.Error("a schema the document lacks: taken")
	}
}
