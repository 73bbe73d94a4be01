//lint:file-ignore SA1019 The SDK marks its v1 dashboard builder deprecated in favour of dashboardv2, Grafana's v2 schema, still experimental in Grafana 12 and not what file provisioning (Grafana's dashboard sidecar) loads; the v1 model is what every Grafana 12 reads.

package main

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/edgeota/edgeota/rollout"
)

// Selectors of the DaemonSets a panel draws: those of the namespaces picked
// (the fleet rows), or of the namespaces and DaemonSets picked.
const (
	inNamespaces = `namespace=~"$namespace"`
	picked       = `namespace=~"$namespace", daemonset=~"$daemonset"`
)

// perDaemonSet is a rollout metric's series, one per DaemonSet whatever
// replica exported it: the metric name, its extra matchers, and what it is
// taken by besides the DaemonSet (a state, a reason).
func perDaemonSet(metric, matchers, by string) string {
	keys := "namespace, daemonset"
	if by != "" {
		keys += ", " + by
	}
	return fmt.Sprintf("max by (%s) (%s{%s})", keys, metric, matchers)
}

// with joins label matchers.
func with(matchers ...string) string { return strings.Join(matchers, ", ") }

// Colours named as Grafana's palette names them.
const (
	green  = "green"
	blue   = "blue"
	red    = "red"
	yellow = "yellow"
	orange = "orange"
	purple = "purple"
	gray   = "text"
)

// panelIDs numbers the panels in the order they are made.
type panelIDs struct{ next uint32 }

func (p *panelIDs) id() uint32 { p.next++; return p.next }

// query is one PromQL target.
func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(ref).Expr(expr).LegendFormat(legend).Range().Datasource(datasource)
}

// valueText maps one value to a text and a colour.
func valueText(value, text, color string) dashboard.ValueMapping {
	return dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{value: {Text: cog.ToPtr(text), Color: cog.ToPtr(color)}}}}
}

// rangeText maps the values from..to to a text and a colour.
func rangeText(from, to float64, text, color string) dashboard.ValueMapping {
	return dashboard.ValueMapping{RangeMap: &dashboard.RangeMap{Type: dashboard.MappingTypeRangeToText,
		Options: dashboard.DashboardRangeMapOptions{From: cog.ToPtr(from), To: cog.ToPtr(to),
			Result: dashboard.ValueMappingResult{Text: cog.ToPtr(text), Color: cog.ToPtr(color)}}}}
}

// colour fixes the colour of one series, by its display name.
func colour(color string) []dashboard.DynamicConfigValue {
	return []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": color}}}
}

// asLines draws a series of a bar chart as an unstacked line.
var asLines = []dashboard.DynamicConfigValue{
	{Id: "custom.drawStyle", Value: "line"},
	{Id: "custom.stacking", Value: map[string]any{"mode": "none", "group": "A"}},
	{Id: "custom.fillOpacity", Value: 0},
}

func legend() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true)
}

func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}

// timeline is a state timeline: one row per series, a colour per state.
func (p *panelIDs) timeline(title, description string, w, h uint32, mappings []dashboard.ValueMapping, noValue string, targets ...cog.Builder[variants.Dataquery]) *statetimeline.PanelBuilder {
	b := statetimeline.NewPanelBuilder().Id(p.id()).Title(title).Description(description).Span(w).Height(h).
		Datasource(datasource).Mappings(mappings).ShowValue(common.VisibilityModeAuto).MergeValues(true).
		RowHeight(0.8).FillOpacity(80).LineWidth(0).Legend(legend().ShowLegend(false)).Tooltip(tooltip())
	if noValue != "" {
		b.NoValue(noValue)
	}
	for _, t := range targets {
		b.WithTarget(t)
	}
	return b
}

// bars is a time series drawn as bars, stacked.
func (p *panelIDs) bars(title, description, unit string, w, h uint32, targets ...cog.Builder[variants.Dataquery]) *timeseries.PanelBuilder {
	b := p.series(title, description, unit, w, h, targets...).DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal).Group("A"))
	return b
}

// series is a time series drawn as lines.
func (p *panelIDs) series(title, description, unit string, w, h uint32, targets ...cog.Builder[variants.Dataquery]) *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().Id(p.id()).Title(title).Description(description).Span(w).Height(h).
		Datasource(datasource).Unit(unit).Min(0).LineWidth(1).FillOpacity(10).ShowPoints(common.VisibilityModeNever).
		Legend(legend()).Tooltip(tooltip())
	for _, t := range targets {
		b.WithTarget(t)
	}
	return b
}

// build lays the dashboard out: the fleet, the DaemonSets picked, proof of
// life, and the controller itself.
func build() *dashboard.DashboardBuilder {
	var p panelIDs
	d := dashboard.NewDashboardBuilder("edgeota: rollouts").
		Uid("edgeota-rollouts").
		Description("Rollouts of DaemonSets by edgeota's controller: waves, halts, pre-downloads, proofs of life, and the controller itself. Generated by hack/dashboard; see docs/operator/watching.md.").
		Tags([]string{"edgeota", "kubernetes", "rollouts"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-6h", "now").
		Refresh("30s").
		Timezone(common.TimeZoneBrowser).
		Link(dashboard.NewDashboardLinkBuilder("Runbooks").Type(dashboard.DashboardLinkTypeLink).
			Url("https://github.com/edgeota/edgeota/blob/main/docs/operations/runbooks.md").TargetBlank(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(pickVariable("namespace", "Namespace", "label_values(edgeota_controller_rollout_desired_nodes, namespace)")).
		WithVariable(pickVariable("daemonset", "DaemonSet", `label_values(edgeota_controller_rollout_desired_nodes{namespace=~"$namespace"}, daemonset)`))

	fleetRow(d, &p)
	rolloutRow(d, &p)
	proofRow(d, &p)
	controllerRow(d, &p)
	return d
}

// pickVariable is a variable listing a label's values, several or all
// (a regex matching any) at once.
func pickVariable(name, label, values string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(values)}).Definition(values).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).IncludeAll(true).AllValue(".*").
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}})
}

// fleetRow: where every rollout of the namespaces picked stands.
func fleetRow(d *dashboard.DashboardBuilder, p *panelIDs) {
	d.WithRow(dashboard.NewRowBuilder("Fleet: every DaemonSet of the namespaces picked").Id(p.id()))
	halted := perDaemonSet("edgeota_controller_rollout_halted", inNamespaces, "")
	paused := perDaemonSet("edgeota_controller_rollout_paused", inNamespaces, "")
	updated := perDaemonSet("edgeota_controller_rollout_nodes", with(inNamespaces, `state="updated"`), "")
	desired := perDaemonSet("edgeota_controller_rollout_desired_nodes", inNamespaces, "")
	// One value per DaemonSet: 4 for a halt, 2 for a pause, 1 while nodes
	// are left; the mappings read the sum by range, the worst first.
	phase := fmt.Sprintf("4 * %s\n+ 2 * %s\n+ (%s < bool %s)", halted, paused, updated, desired)
	d.WithPanel(p.timeline("Rollout phase",
		"Each DaemonSet's rollout over time: rolling (nodes left to upgrade), complete (every node on the target revision), paused (edgeota.io/paused), halted (max-failed nodes failed: nothing more is deleted or offered).",
		24, 7, []dashboard.ValueMapping{
			rangeText(4, 7, "halted", red), rangeText(2, 3, "paused", purple),
			valueText("1", "rolling", blue), valueText("0", "complete", green),
		}, "", query("A", phase, "{{namespace}}/{{daemonset}}")))

	reasons := make([]string, len(rollout.HaltReasons))
	for i, r := range rollout.HaltReasons {
		reasons[i] = string(r)
	}
	d.WithPanel(p.timeline("Halts and their reason",
		"The DaemonSets whose rollout is halted, a row per reason ("+strings.Join(reasons, ", ")+"): nodes_failed, upgraded nodes failed (the version may be at fault); pulls_failed, only pre-downloads failed, no pod lost; record_lost, only failures the rollout record lost. The alert EdgeotaRolloutHalted fires on the same series.",
		12, 7, []dashboard.ValueMapping{valueText("1", "halted", red)}, "no rollout halted",
		query("A", perDaemonSet("edgeota_controller_rollout_halt_reason", inNamespaces, "reason")+" == 1", "{{namespace}}/{{daemonset}}: {{reason}}")))

	d.WithPanel(p.timeline("Target revision",
		"The ControllerRevision each DaemonSet rolls out (kubectl rollout history's REVISION): a new value starts a new rollout.",
		12, 7, nil, "",
		query("A", perDaemonSet("edgeota_controller_rollout_target_revision", inNamespaces, ""), "{{namespace}}/{{daemonset}}")).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdPaletteClassicByName)))

	d.WithPanel(p.series("Nodes updated",
		"The share of each DaemonSet's nodes settled on its target revision and proven alive: the waves show as steps.",
		"percentunit", 24, 8,
		query("A", updated+"\n/ "+desired, "{{namespace}}/{{daemonset}}")).Max(1))
}

// rolloutRow: the rollout of the DaemonSets picked, summed when several are.
func rolloutRow(d *dashboard.DashboardBuilder, p *panelIDs) {
	d.WithRow(dashboard.NewRowBuilder("Rollout of $daemonset").Id(p.id()))
	moving := `state=~"updated|in_flight|failed"`
	nodes := perDaemonSet("edgeota_controller_rollout_nodes", with(picked, moving), "state")
	left := fmt.Sprintf("sum(clamp_min(\n  %s\n  - sum by (namespace, daemonset) (%s),\n0))",
		perDaemonSet("edgeota_controller_rollout_desired_nodes", picked, ""), nodes)
	d.WithPanel(p.bars("Nodes by state",
		"Nodes by where the rollout has them: updated (settled on the target revision and proven alive), in flight (old pod deleted or offer taken, new pod not settled or not proven yet), failed (they count toward max-failed), and not yet (still on the old revision, for any reason: see Why nodes wait). Each wave shows as in flight turning to updated.",
		"short", 12, 9,
		query("A", "sum by (state) (\n  "+nodes+"\n)", "{{state}}"),
		query("B", left, "not yet")).
		OverrideByName("updated", colour(green)).OverrideByName("in_flight", colour(blue)).
		OverrideByName("failed", colour(red)).OverrideByName("not yet", colour(gray)))

	waits := perDaemonSet("edgeota_controller_rollout_nodes",
		with(picked, `state=~"skipped|held_back|held|waiting_for_window|offered|settled_unavailable"`), "state")
	d.WithPanel(p.series("Why nodes wait",
		"Nodes the rollout waits for, by reason: skipped (NotReady: upgraded when back), held_back (node selector, partition, or pause), held (by their owner, edgeota.io/hold), waiting_for_window (their maintenance window is closed), offered (OTA offers their owner has not taken yet), settled_unavailable (settled nodes whose pod is unavailable while Ready: they hold the budget). A node may count in two (an updated node gone offline is skipped too).",
		"short", 12, 9,
		query("A", "sum by (state) (\n  "+waits+"\n)", "{{state}}")).
		OverrideByName("skipped", colour(gray)).OverrideByName("held_back", colour(purple)).
		OverrideByName("held", colour(yellow)).OverrideByName("waiting_for_window", colour(blue)).
		OverrideByName("offered", colour(green)).OverrideByName("settled_unavailable", colour(orange)))

	d.WithPanel(p.bars("Pre-downloads by state",
		"Pulls of the target's images before each node's turn (edgeota.io/pre-download): in flight, done (images on the node, waiting for its turn) and failed (for good; no pod lost, but it counts toward max-failed) stacked; as lines, waiting (nodes the budget would take now but for their download) and timed out.",
		"short", 24, 8,
		query("A", "sum by (state) (\n  "+perDaemonSet("edgeota_controller_rollout_pulls", with(picked, `state=~"in_flight|done|failed"`), "state")+"\n)", "{{state}}"),
		query("B", "sum by (state) (\n  "+perDaemonSet("edgeota_controller_rollout_pulls", with(picked, `state=~"waiting|timed_out"`), "state")+"\n)", "{{state}}")).
		OverrideByQuery("B", asLines).
		OverrideByName("in_flight", colour(blue)).OverrideByName("done", colour(green)).OverrideByName("failed", colour(red)).
		OverrideByName("waiting", colour(yellow)).OverrideByName("timed_out", colour(orange)))
}

// proofRow: how nodes prove alive after their new pod settles, which is
// how the agents' health shows at fleet scale.
func proofRow(d *dashboard.DashboardBuilder, p *panelIDs) {
	d.WithRow(dashboard.NewRowBuilder("Proof of life of $daemonset").Id(p.id()))
	d.WithPanel(p.bars("Updated nodes by proof",
		"What proved each updated node alive after its new pod settled: answer (its node agent answered the controller's challenge), heartbeat (its Lease renewal or Node status). Many heartbeats where agents run mean agents that do not answer.",
		"short", 8, 8,
		query("A", "sum by (proof) (\n  "+perDaemonSet("edgeota_controller_rollout_proven_nodes", picked, "proof")+"\n)", "{{proof}}")).
		OverrideByName("answer", colour(green)).OverrideByName("heartbeat", colour(yellow)))

	d.WithPanel(p.bars("Challenges answered and unanswered",
		"Proof-of-life challenges written on settled pods (line), and how they ended (bars): answered by the node's agent, or unanswered, the node proven by its heartbeat instead (an agent down, cut off, or unable to write). Counts per interval.",
		"short", 8, 8,
		query("A", "sum(increase(edgeota_controller_proofs_total{"+with(picked, `proof="answer"`)+"}[$__rate_interval]))", "answered"),
		query("B", "sum(increase(edgeota_controller_proofs_total{"+with(picked, `proof="heartbeat"`)+"}[$__rate_interval]))", "unanswered"),
		query("C", "sum(increase(edgeota_controller_challenges_written_total{"+picked+"}[$__rate_interval]))", "written")).
		OverrideByQuery("C", asLines).
		OverrideByName("answered", colour(green)).OverrideByName("unanswered", colour(orange)).OverrideByName("written", colour(blue)))

	d.WithPanel(p.series("Nodes awaiting their proof",
		"Nodes whose new pod settled and that wait for a heartbeat or their agent's answer: each holds the budget until proven.",
		"short", 8, 8,
		query("A", "sum(\n  "+perDaemonSet("edgeota_controller_rollout_awaiting_proof_nodes", picked, "")+"\n)", "awaiting")))

	bucket := "sum by (proof, le) (rate(edgeota_controller_proof_wait_seconds_bucket{" + picked + "}[$__rate_interval]))"
	d.WithPanel(p.series("Settled → proof wait",
		"How long nodes waited, from the controller judging their new pod settled to their proof of life, by proof: what proof of life adds to each wave.",
		"s", 24, 8,
		query("A", "histogram_quantile(0.5,\n  "+bucket+"\n)", "p50 {{proof}}"),
		query("B", "histogram_quantile(0.9,\n  "+bucket+"\n)", "p90 {{proof}}")))
}

// controllerRow: the controller's own work, over every replica.
func controllerRow(d *dashboard.DashboardBuilder, p *panelIDs) {
	d.WithRow(dashboard.NewRowBuilder("Controller").Id(p.id()))
	d.WithPanel(p.timeline("Replicas",
		"Each ota-controller replica scraped: the leader acts, standbys wait to take over (within about 15 s of the leader stopping).",
		12, 6, []dashboard.ValueMapping{valueText("1", "leader", green), valueText("0", "standby", gray)}, "no replica scraped",
		query("A", "max by (pod) (edgeota_controller_leader)", "{{pod}}")))
	d.WithPanel(p.series("Work queue",
		"DaemonSets waiting to be synced (the leader's queue): growing while syncs lag behind events.",
		"short", 12, 6,
		query("A", "max(edgeota_controller_queue_depth)", "queued")))

	d.WithPanel(p.series("Sync time",
		"Time to sync one DaemonSet (read the caches, decide, act), by quantile.",
		"s", 8, 8,
		query("A", "histogram_quantile(0.5, sum by (le) (rate(edgeota_controller_sync_duration_seconds_bucket[$__rate_interval])))", "p50"),
		query("B", "histogram_quantile(0.99, sum by (le) (rate(edgeota_controller_sync_duration_seconds_bucket[$__rate_interval])))", "p99")))
	d.WithPanel(p.bars("Syncs by result",
		"Syncs per second, successful or failed (a failed one is retried with backoff; the controller's log says why).",
		"ops", 8, 8,
		query("A", "sum by (result) (rate(edgeota_controller_sync_duration_seconds_count[$__rate_interval]))", "{{result}}")).
		OverrideByName("success", colour(green)).OverrideByName("error", colour(red)))
	d.WithPanel(p.bars("API requests",
		"Requests to the API server per second, by method and status code, from client-go's own count: the controller's clients and its leader election.",
		"reqps", 8, 8,
		query("A", "sum by (method, code) (rate(edgeota_controller_api_requests_total[$__rate_interval]))", "{{method}} {{code}}")))

	d.WithPanel(p.series("Rollout record writes",
		"Writes of the rollout records (ConfigMaps holding every node's stage), per second, and the bytes they leave (right axis): what the record costs etcd and its watchers.",
		"wps", 24, 7,
		query("A", "sum(rate(edgeota_controller_record_writes_total[$__rate_interval]))", "writes"),
		query("B", "sum(rate(edgeota_controller_record_bytes_written_total[$__rate_interval]))", "bytes")).
		OverrideByQuery("B", []dashboard.DynamicConfigValue{{Id: "unit", Value: "Bps"}, {Id: "custom.axisPlacement", Value: "right"}}))
}
