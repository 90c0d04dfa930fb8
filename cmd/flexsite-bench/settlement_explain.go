package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/jackc/pgx/v5/pgxpool"
)

// settlementExplainEnv, when set to a directory, makes the settlement step say where its time
// goes (issue 39): the bench's PostgreSQL logs the plan of every statement of the measured
// rounds that takes 50 ms or more, both sides', with EXPLAIN (ANALYZE, BUFFERS) figures
// (auto_explain: the statements exactly as settlementstore runs them) into
// settlement-postgres.log, and the bench writes a Go CPU profile of the rounds (the settle
// side's Go work: the raw side's is only waiting) to settlement-cpu.pb.gz. Timing every plan
// node slows both sides: the figures of such a run are not the step's.
const settlementExplainEnv = "BENCH_SETTLEMENT_EXPLAIN"

type settlementDiagnosis struct {
	dir         string
	postgresLog io.Writer
	logFile     *os.File
	profile     *os.File
}

func newSettlementDiagnosis(dir string) (*settlementDiagnosis, error) {
	d := &settlementDiagnosis{dir: dir}
	if dir == "" {
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "settlement-postgres.log"))
	if err != nil {
		return nil, err
	}
	d.logFile, d.postgresLog = f, f
	logf("%s=%s: plans in %s, a CPU profile in %s (figures slowed by the timing of every plan node)",
		settlementExplainEnv, dir, f.Name(), filepath.Join(dir, "settlement-cpu.pb.gz"))
	return d, nil
}

// explainFrom turns auto_explain on for every connection of the pool from now on.
func (d *settlementDiagnosis) explainFrom(ctx context.Context, pool *pgxpool.Pool) error {
	if d.dir == "" {
		return nil
	}
	for _, set := range []string{"session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = '50ms'",
		"auto_explain.log_analyze = on", "auto_explain.log_buffers = on", "auto_explain.log_timing = on"} {
		if _, err := pool.Exec(ctx, "ALTER DATABASE flexsite_bench SET "+set); err != nil {
			return fmt.Errorf("auto_explain: %w", err)
		}
	}
	pool.Reset() // new connections, which load it
	return nil
}

func (d *settlementDiagnosis) startProfile() error {
	if d.dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(d.dir, "settlement-cpu.pb.gz"))
	if err != nil {
		return err
	}
	d.profile = f
	return pprof.StartCPUProfile(f)
}

func (d *settlementDiagnosis) stopProfile() {
	if d.profile != nil {
		pprof.StopCPUProfile()
		_ = d.profile.Close()
		d.profile = nil
	}
}

func (d *settlementDiagnosis) close() {
	d.stopProfile()
	if d.logFile != nil {
		_ = d.logFile.Close()
	}
}
