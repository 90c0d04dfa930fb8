package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// readingsScenario names the scenario: its step, its figures' group and its table section.
	readingsScenario  = "readings"
	readingsNamespace = "bench-readings"
	// readingsRawOrganisation is the raw side's organisation column: the same rows as the
	// REST side's, under another organisation, so that neither side meets the other's keys.
	readingsRawOrganisation = "bench-readings-raw"
	// readingsConcurrency is how many batches each side sends at once.
	readingsConcurrency = 4
	// readingLabel is the label of every reading the bench sends.
	readingLabel = "boundary_import_kw"
)

// readingsParams size the readings scenario.
type readingsParams struct {
	households, batch, batchesPerPart, rounds int
}

func (b *bench) readingsParams() readingsParams {
	if b.p.Mode == modeQuick {
		return readingsParams{households: 10, batch: 2000, batchesPerPart: 8, rounds: 2}
	}
	return readingsParams{households: 50, batch: 5000, batchesPerPart: 12, rounds: 4}
}

// readingRow is one reading of the scenario, as both sides write it.
type readingRow struct {
	siteID, assetID string
	start, end      time.Time
	value           float64
}

// runReadings compares readings taken through POST /data/readings (parse, each reading
// judged, one upsert per request) with a raw COPY of the same rows into the same table of the
// same database (scenario 7): the same batches, the same concurrency, in parts that alternate
// A B B A round after round, so that the machine's drift weighs on both sides alike.
func runReadings(ctx context.Context, b *bench, rep *report) error {
	rp := b.readingsParams()
	o, err := b.organisation(ctx, readingsNamespace, 15)
	if err != nil {
		return err
	}
	if _, _, err := b.onboardREST(ctx, o, rp.households); err != nil {
		return err
	}
	assets, err := o.onboardedAssets(ctx)
	if err != nil {
		return err
	}

	// Every batch's rows, made ahead: each batch is a run of one-minute kW readings of one
	// asset, every key new, in the months the manager made partitions for. Each side writes
	// every batch once, the raw side under its own organisation.
	parts := 4 * rp.rounds
	nBatches := parts/2*rp.batchesPerPart + 1 // + a warm-up batch
	origin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -20)
	batches := make([][]readingRow, nBatches)
	bodies := make([][]byte, nBatches)
	for k := range batches {
		a := assets[k%len(assets)]
		// Each asset's batches follow one another in time: no key is written twice.
		first := origin.Add(time.Duration(k/len(assets)*rp.batch) * time.Minute)
		rows := make([]readingRow, rp.batch)
		wire := make([]map[string]any, rp.batch)
		for i := range rows {
			s := first.Add(time.Duration(i) * time.Minute)
			v := float64((k*7+i)%4000)/1000 - 1
			rows[i] = readingRow{siteID: a.siteID, assetID: a.assetID, start: s, end: s.Add(time.Minute), value: v}
			wire[i] = map[string]any{"asset_id": a.assetID, "label": readingLabel, "value": v,
				"start_timestamp": s.Format(time.RFC3339), "end_timestamp": s.Add(time.Minute).Format(time.RFC3339)}
		}
		batches[k] = rows
		if bodies[k], err = json.Marshal(map[string]any{"readings": wire}); err != nil {
			return err
		}
	}

	nextRest, nextRaw := 0, 0
	take := func(next *int, n int) []int {
		ks := make([]int, n)
		for i := range ks {
			ks[i] = *next
			*next++
		}
		return ks
	}
	restPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), readingsConcurrency, func(ctx context.Context, i int) error {
			return b.postReadings(ctx, o, bodies[ks[i]], rp.batch)
		})
	}
	rawPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), readingsConcurrency, func(ctx context.Context, i int) error {
			return b.copyReadings(ctx, batches[ks[i]])
		})
	}
	// Warm up both paths (connections, the first partitions, the first plans).
	if _, err := restPart(take(&nextRest, 1)); err != nil {
		return err
	}
	if _, err := rawPart(take(&nextRaw, 1)); err != nil {
		return err
	}
	var rest, raw timings
	for i := range parts {
		// A B B A: parts 0 and 3 of every four are REST, 1 and 2 raw.
		if i%4 == 0 || i%4 == 3 {
			t, err := restPart(take(&nextRest, rp.batchesPerPart))
			if err != nil {
				return err
			}
			rest.merge(t)
		} else {
			t, err := rawPart(take(&nextRaw, rp.batchesPerPart))
			if err != nil {
				return err
			}
			raw.merge(t)
		}
	}
	stored, err := b.countReadings(ctx)
	if err != nil {
		return err
	}
	want := int64(nBatches * rp.batch)
	if stored[readingsNamespace] != want || stored[readingsRawOrganisation] != want {
		return fmt.Errorf("stored %v readings, want %d a side", stored, want)
	}
	restRate, rawRate := rest.rate()*float64(rp.batch), raw.rate()*float64(rp.batch)
	rep.add(readingsScenario, "rest_readings_per_sec", restRate, unitPerSec)
	rep.add(readingsScenario, "raw_copy_readings_per_sec", rawRate, unitPerSec)
	rep.add(readingsScenario, "rest_batch_p50", rest.percentileMS(50), unitMS)
	rep.add(readingsScenario, "raw_copy_batch_p50", raw.percentileMS(50), unitMS)
	rep.addTarget(readingsScenario, "rest_vs_raw_copy_ratio", ratio(restRate, rawRate), unitRatio, target{">=", 0.5})
	rep.detail(readingsScenario, map[string]any{"batch_readings": rp.batch, "batches_per_side": len(rest.durations),
		"concurrency": readingsConcurrency, "assets": len(assets), "rounds": rp.rounds, "body_bytes": len(bodies[0])})
	return nil
}

// postReadings sends one batch through POST /data/readings and checks every reading was
// accepted.
func (b *bench) postReadings(ctx context.Context, o *org, body []byte, n int) error {
	token, err := o.api.bearer(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.api.base+"/data/readings", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /data/readings: %s: %s", resp.Status, firstLine(string(data)))
	}
	// Counted, not decoded: the bench's client shares the machine with what it measures.
	if got := bytes.Count(data, []byte(`"accepted":true`)); got != n {
		return fmt.Errorf("POST /data/readings accepted %d of %d readings: %s", got, n, firstLine(string(data)))
	}
	return nil
}

// copyReadings writes one batch with a raw COPY into the readings table.
func (b *bench) copyReadings(ctx context.Context, rows []readingRow) error {
	_, err := b.db.CopyFrom(ctx, pgx.Identifier{"readings"},
		[]string{"organisation", "site_id", "asset_id", "label", "start_at", "end_at", "value"},
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			r := rows[i]
			return []any{readingsRawOrganisation, r.siteID, r.assetID, readingLabel, r.start, r.end, r.value}, nil
		}))
	return err
}

// countReadings counts the stored readings of each side.
func (b *bench) countReadings(ctx context.Context) (map[string]int64, error) {
	rows, err := b.db.Query(ctx, `SELECT organisation, count(*) FROM readings WHERE organisation = ANY($1) GROUP BY organisation`,
		[]string{readingsNamespace, readingsRawOrganisation})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var org string
		var n int64
		if err := rows.Scan(&org, &n); err != nil {
			return nil, err
		}
		out[org] = n
	}
	return out, rows.Err()
}

// siteAsset is an onboarded household's asset, by API ids.
type siteAsset struct{ siteID, assetID string }

// onboardedAssets are the assets of the organisation's onboarded households, as the REST API
// lists them (the readings and callbacks scenarios write about them).
func (o *org) onboardedAssets(ctx context.Context) ([]siteAsset, error) {
	var assets []siteAsset
	for _, id := range o.siteIDs {
		var site struct {
			AssetIDs []string `json:"asset_ids"`
		}
		if err := o.api.call(ctx, "GET", "/entities/site/"+id, nil, &site); err != nil {
			return nil, err
		}
		for _, a := range site.AssetIDs {
			assets = append(assets, siteAsset{id, a})
		}
	}
	if len(assets) == 0 {
		return nil, fmt.Errorf("the onboarded households have no assets")
	}
	return assets, nil
}
