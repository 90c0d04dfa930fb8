package main

// topic is one table of docs/performance.md: the figures of one thing measured, each with
// what it compares. A figure with a target in the run shows it and whether it was met; the
// others are there to read the target by (the raw baseline's own figure, a split).
type topic struct {
	ID    string // the block's id: <!-- bench-figures:begin ID -->
	Title string // the README's topic column
	Rows  []figureRow
	// Page is the file of the block ("": docs/performance.md).
	Page string
}

// page is the file the topic's table is written into.
func (t topic) page() string {
	if t.Page == "" {
		return performancePage
	}
	return t.Page
}

// sameAtLarger describes a fleet figure's row at the larger size, below its row at the smaller.
const sameAtLarger = "the same, its larger size"

type figureRow struct {
	Figure string // scenario.key in bench/results.json ("*" in the key: every figure it matches)
	What   string
}

// topics are docs/performance.md's tables, in the page's order. `benchdocs` refuses a row
// whose figure the bench cannot produce, and a target of the bench that no row shows.
var topics = []topic{
	{ID: "onboard", Title: "onboard and writes", Rows: []figureRow{
		{"onboard.rest_vs_raw_ratio", "REST onboards/s ÷ the same objects written straight through client-go/s"},
		{"writes.rest_writes_per_onboard", "API writes per REST onboard, until the household has converged"},
		{"resync.writes", "API writes during an idle resync (a manager restart)"},
		{"catalogue.onboard_p99_during_fanout_vs_idle_ratio", "REST onboard p99 during a catalogue change ÷ on an idle manager"},
		{"scale.onboard_p50_large_vs_small_ratio", "REST onboard p50 at the larger fleet ÷ at the smaller"},
		{"fleet.onboard_p50_growth_ratio", "REST onboard p50 at the fleet step's larger size ÷ its smaller"},
		{"fleet.raw_onboard_p50_growth_ratio", "the same growth of raw client-go writes into a namespace of the same size"},
		{"fleet.api_list_per_onboard_small", "API-server LISTs per REST onboard, smaller fleet"},
		{"fleet.api_list_per_onboard_large", "API-server LISTs per REST onboard, larger fleet"},
		{"fleet.api_requests_per_onboard_growth_ratio", "API-server requests per REST onboard, larger fleet ÷ smaller"},
		{"fleet.api_verb_*_per_onboard_growth_ratio", "the same, each verb"},
		{"fleet.api_verb_*_per_onboard_large", "API-server requests of each verb per REST onboard, larger fleet"},
		{"fleet.apiserver_cpu_per_onboard_vs_raw_ratio_large",
			"API-server CPU per REST onboard ÷ per raw household in a namespace of the same size, larger fleet"},
		{"fleet.apiserver_cpu_per_onboard_vs_raw_ratio_small", "the same, smaller fleet"},
		{"fleet.apiserver_cpu_ms_per_onboard_large", "API-server CPU per REST onboard, larger fleet (ms)"},
		{"fleet.apiserver_cpu_ms_per_raw_household_large", "API-server CPU per raw household, larger fleet (ms)"},
	}},
	{ID: "convergence", Title: "convergence", Rows: []figureRow{
		{"convergence.p99_vs_raw_watch_ratio",
			"a write → the Site's status p99 ÷ the API server's own write → watch event p99"},
		{"catalogue.asset_model_change_vs_raw_patches_ratio",
			"an asset-model change over every site, until every status agrees ÷ a client writing the same status patches"},
		{"catalogue.raw_status_patches_per_second", "the raw side: status patches/s"},
	}},
	{ID: "eligibility", Title: "eligibility read", Rows: []figureRow{
		{"reads.eligibility_vs_trivial_ratio", "`GET …/eligibility`/s ÷ a bare `net/http` handler's/s"},
		{"reads.eligibility_own_work_vs_stack_trivial_ratio",
			"the read ÷ a trivial route behind the manager's whole stack (the read's own work)"},
		{"reads.stack_vs_bare_trivial_ratio",
			"that trivial route ÷ the bare handler answering the same bytes (what the stack costs every route)"},
		{"reads.eligibility_server_cpu_us_per_request", "manager CPU a read (µs)"},
		{"reads.trivial_server_cpu_us_per_request", "the bare handler's CPU a request (µs)"},
		{"fleet.eligibility_cpu_per_read_growth_ratio", "manager CPU a read at the fleet step's larger size ÷ its smaller"},
		{"fleet.eligibility_alloc_bytes_per_read_small", "bytes the manager allocates a read, the fleet step's smaller size"},
		{"fleet.eligibility_alloc_bytes_per_read_large", sameAtLarger},
	}},
	{ID: "transactions", Title: "transactions page", Rows: []figureRow{
		{"reads.transactions_vs_same_size_trivial_ratio",
			"`GET /rewards/{site_id}/transactions`/s (kept pages) ÷ the bare handler answering as many bytes"},
		{"transactions_cold.page_over_same_sql_ratio",
			"the same page with nothing kept ÷ a handler running the same SQL through the same pool"},
		{"transactions_cold.page_over_same_sql_cpu_ratio", "the same in CPU a read (raw ÷ page, both processes)"},
		{"fleet.transactions_cpu_per_read_growth_ratio", "manager CPU a page at the fleet step's larger size ÷ its smaller"},
		{"fleet.transactions_alloc_bytes_per_read_small", "bytes the manager allocates a page, the fleet step's smaller size"},
		{"fleet.transactions_alloc_bytes_per_read_large", sameAtLarger},
	}},
	{ID: "pricing", Title: "price curve and battery schedule", Rows: []figureRow{
		{"pricing.price_curve_vs_same_size_trivial_ratio",
			"`GET …/price-curve`/s ÷ the bare handler answering as many bytes/s"},
		{"pricing.battery_schedule_vs_same_sql_ratio",
			"`GET …/battery-schedule`/s ÷ a handler running its dispatch query through the same pool"},
		{"pricing.battery_schedule_vs_same_size_trivial_ratio",
			"the battery schedule ÷ the bare handler answering as many bytes"},
		{"fleet.price_curve_cpu_per_read_growth_ratio", "manager CPU a curve at the fleet step's larger size ÷ its smaller"},
		{"fleet.price_curve_alloc_bytes_per_read_small", "bytes the manager allocates a curve, the fleet step's smaller size"},
		{"fleet.price_curve_alloc_bytes_per_read_large", sameAtLarger},
		{"fleet.battery_schedule_cpu_per_read_growth_ratio",
			"manager CPU a battery schedule at the fleet step's larger size ÷ its smaller"},
		{"fleet.battery_schedule_alloc_bytes_per_read_small",
			"bytes the manager allocates a battery schedule, the fleet step's smaller size"},
		{"fleet.battery_schedule_alloc_bytes_per_read_large", sameAtLarger},
		{"ev-schedule.cpu_per_plan_48_us", "CPU of one EV schedule over 48 half-hours (µs; an absolute bound)"},
	}},
	{ID: "settlement", Title: "settlement", Rows: []figureRow{
		{"settlement.settle_to_raw_sql_ratio",
			"settling one flex event over every site ÷ one raw SQL query of the same per-site sums (medians)"},
		{"settlement.settle_seconds", "settle, median (s)"},
		{"settlement.raw_sql_seconds", "raw SQL, median (s)"},
	}},
	{ID: "readings", Title: "readings and callbacks", Rows: []figureRow{
		{"readings.rest_vs_raw_copy_ratio", "readings/s through `POST /data/readings` ÷ a raw `COPY` of the same rows/s"},
		{"callbacks.callbacks_vs_readings_requests_ratio",
			"dispatch status callbacks/s ÷ one-reading `POST /data/readings` requests/s"},
	}},
	{ID: "openadr", Title: "OpenADR door", Rows: []figureRow{
		{"openadr.report_vs_callback_throughput_ratio",
			"a VEN's `OPERATING_STATE` reports/s (`POST /openadr3/3.0.1/reports`) ÷ REST callbacks/s of the same change (ACCEPTED)"},
		{"openadr.reports_per_sec", "the VEN's reports/s"},
		{"openadr.callbacks_per_sec", "the REST callbacks/s"},
		{"openadr.report_vs_callback_cpu_ratio", "the same in CPU a request (callback ÷ report, the manager and PostgreSQL)"},
		{"openadr.event_search_vs_sql_ratio",
			"pages/s of a VEN's search of its 1,000 events (`GET /openadr3/3.0.1/events`, 20 pages of 50) ÷ " +
				"a handler running the same SQL through the same pool, writing the same bytes"},
		{"openadr.event_search_pages_per_sec", "the door's pages/s"},
		{"openadr.event_search_same_sql_pages_per_sec", "the same SQL's pages/s"},
		{"openadr.event_search_vs_sql_cpu_ratio", "the search in CPU a page (raw ÷ door, both processes)"},
		{"openadr.event_search_page_bytes_mean", "bytes a page (50 events)"},
	}},
	{ID: "notifications", Title: "notifications and dispatch", Rows: []figureRow{
		{"notifications.outbox_extra_writes_per_changed_site", "status writes per changed site with a subscription, less without"},
		{"notifications.change_to_delivery_p99_ms", "an asset write → the receiver's `site.eligibility_changed`, p99 (ms)"},
		{"notifications.delivery_vs_convergence_p99_ratio",
			"that p99 ÷ the asset write → the Site's status showing it, p99 (the controller's own reaction)"},
		{"notifications.beside_dead_vs_alone_p99_ratio", "that p99 beside a receiver that hangs ÷ alone"},
		{"notifications.backlog_delivered", "credits delivered after the receiver was down (of `notifications.backlog_credits`)"},
		{"notifications.backlog_credits", "credits made while it was down"},
		{"notifications.backlog_in_order", "1 when they arrived in the order credited"},
		{"dispatch.dispatch_vs_notification_p99_ratio",
			"creation of a flex event → each `dispatch.requested` at the receiver, p99 ÷ the notification p99 " +
				"(reported: it grows with the burst's size)"},
		{"dispatch.all_delivered_vs_raw_sender_ratio",
			"creation → the last dispatch verified, worst round ÷ the raw sender's worst round (the same rows inserted, the same bodies posted)"},
		{"dispatch.all_delivered_vs_raw_sender_median_ratio", "the same, median round ÷ median round"},
		{"dispatch.other_org_during_vs_without_burst_p99_ratio",
			"another organisation's change → delivery p99 during the burst ÷ without it"},
		{"dispatch.creation_to_all_issued_max_ms", "creation → every dispatch issued, worst round (ms)"},
		{"dispatch.creation_to_all_delivered_max_ms", "creation → the last dispatch verified, worst round (ms)"},
		{"dispatch.creation_to_all_delivered_median_ms", "the same, median round (ms)"},
		{"dispatch.raw_sender_all_delivered_ms", "the raw sender, all delivered, worst round (ms)"},
		{"dispatch.raw_sender_all_delivered_median_ms", "the same, median round (ms)"},
		{"dispatch.unverified_requests", "requests whose signature did not verify"},
	}},
	{ID: "meters", Title: "meter register", Rows: []figureRow{
		{"meters.import_vs_raw_copy_ratio", "a raw `COPY` of the register's file ÷ `flexsite-admin meters import` of it (times)"},
		{"meters.search_postcode_p99_vs_raw_ratio", "a raw server's p99 ÷ `GET /meter/search`'s, the same query"},
		{"meters.by_address_p99_vs_raw_ratio", "a raw server's p99 ÷ `POST /meter/by-address`'s, the same queries"},
		{"meters.reimport_vs_raw_copy_ratio", "the raw `COPY` ÷ importing the same file again into the loaded register"},
		{"meters.total_bytes_per_point", "database bytes a meter point, table and indexes"},
	}},
	{ID: "shards", Title: "shards", Rows: []figureRow{
		{"shards.shard-1_heap_vs_singleton_half_ratio",
			"shard 1's live heap, 2 shards holding 2N sites ÷ (a controller tier shard alone holding N + 16 MiB)"},
		{"shards.shard-2_heap_vs_singleton_half_ratio", "shard 2's, the same"},
		{"shards.api_live_heap_mib_per_1k_sites", "an API replica's live heap per 1,000 sites, cold starts at N and 2N (MiB)"},
		{"shards.eligibility_api_vs_singleton_ratio", "eligibility reads/s on an API replica ÷ on the singleton, alternating"},
		{"shards.transactions_api_vs_singleton_ratio", "a transactions page, the same"},
		{"shards.fanout_2_vs_1_shard_ratio", "a catalogue change's sites/s with two shards ÷ with one, measured"},
		{"shards.fanout_2_vs_1_shard_simulated_ratio",
			"the same from the shards' CPU per changed site (an API server with headroom)"},
		{"shards.departure_first_status_write_lease_durations",
			"a killed shard: the first of its households reconciled by the other " +
				"(its first status write), in lease durations"},
		{"shards.departure_first_status_write_seconds", "the same in seconds"},
		{"shards.departure_first_reconciled_lease_durations",
			"the first of them whose status is right again (agrees with a catalogue change made at the kill), in lease durations"},
		{"shards.departure_first_reconciled_seconds", "the same in seconds"},
		{"shards.departure_interim_statuses",
			"of them, published on the way as neither before nor after the change (a site evaluated without its assets)"},
		{"shards.lease_duration_seconds", "the shard lease's duration"},
		{"shards.departure_households_per_second", "its households reconciled elsewhere a second, first to last"},
		{"shards.sharder_qps", "the sharder's client rate (requests/s), which sets it"},
		{"shards.shard-1_share_ratio", "shard 1's share of the fleet's sites"},
		{"shards.shard-1_share_max_ratio", "the same, upper bound"},
		{"shards.shard-2_share_ratio", "shard 2's share"},
		{"shards.shard-2_share_max_ratio", "the same, upper bound"},
	}},
	{ID: "staleness", Title: "cross-replica staleness", Page: "docs/scale.md", Rows: []figureRow{
		{"shards.cross_replica_staleness_p99_ms",
			"a write through one API replica → another replica's REST read shows it, p99"},
		{"shards.cross_replica_staleness_p50_ms", "the same, median"},
		{"shards.cross_replica_staleness_max_ms", "the same, the longest"},
		{"shards.staleness_writes", "writes measured"},
		{"shards.staleness_sites", "sites in the cluster meanwhile"},
	}},
	{ID: "receiver", Title: "what a receiver sees", Page: "docs/notifications.md", Rows: []figureRow{
		{"notifications.change_to_delivery_p50_ms", "an asset write → the receiver's `site.eligibility_changed`, median (ms)"},
		{"notifications.change_to_delivery_p99_ms", "the same, p99 (ms)"},
		{"notifications.convergence_p99_ms", "the same write → the Site's status showing it, p99 (ms)"},
		{"notifications.event_recorded_to_receiver_p50_ms", "the event recorded → the receiver, median (ms)"},
		{"notifications.event_recorded_to_receiver_p99_ms", "the same, p99 (ms)"},
		{"dispatch.sites", "a burst: dispatchable sites of one flex event"},
		{"dispatch.creation_to_all_issued_max_ms", "the flex event created → every dispatch issued, worst round (ms)"},
		{"dispatch.creation_to_dispatch_delivered_p50_ms", "the flex event created → a `dispatch.requested` verified, median (ms)"},
		{"dispatch.creation_to_all_delivered_max_ms", "the flex event created → the last one verified, worst round (ms)"},
		{"dispatch.other_org_change_to_delivery_during_burst_p99_ms",
			"another organisation's change → its delivery during the burst, p99 (ms)"},
	}},
	{ID: "memory", Title: "memory and etcd bytes", Rows: []figureRow{
		{"scale.etcd_bytes_per_site_vs_10kb_ratio",
			"etcd bytes per household (Site, 2 Assets, Enrolment, a year of weekly rewards) ÷ 10 KiB"},
		{"scale.etcd_kb_per_site", "etcd KiB per household"},
		{"scale.heap_per_1k_sites_vs_15mib_ratio",
			"manager heap in use per 1,000 households right after onboarding them ÷ 15 MiB"},
		{"scale.heap_live_mib_per_1k_sites", "of which live objects (MiB per 1,000)"},
		{"scale.cold_start_heap_mib_per_1k_sites",
			"heap in use per 1,000 households after a cold start with the whole fleet (MiB)"},
		{"scale.cold_start_ready_seconds", "cold start with the whole fleet: ready (s)"},
		{"fleet.manager_idle_cpu_growth_ratio", "manager CPU while idle at the fleet step's larger size ÷ its smaller"},
		{"fleet.manager_idle_cpu_ms_per_second_small", "manager CPU while idle, the fleet step's smaller size (ms a second)"},
		{"fleet.manager_idle_cpu_ms_per_second_large", sameAtLarger},
	}},
	{ID: "hostile", Title: "hostile input", Rows: []figureRow{
		{"hostile.readings_bomb_413_ms", "2.7 million empty readings in a few KB of gzip: time to the 413 (ms)"},
		{"hostile.readings_bomb_rss_rise_mib", "the manager's RSS rise meanwhile (MiB)"},
		{"hostile.callbacks_unknown_api_requests", "API-server requests for 200 OAuth callbacks with unknown states"},
	}},
}
