package main

import (
	"fmt"
	"go/ast"
	"slices"
	"strings"
)

// prometheusPkg and collectorsPkg are client_golang's packages whose calls
// define the metrics.
const (
	prometheusPkg = "github.com/prometheus/client_golang/prometheus"
	collectorsPkg = "github.com/prometheus/client_golang/prometheus/collectors"
)

// metricTypes are the option types of client_golang's metrics, by the type
// each makes.
var metricTypes = map[string]string{
	"CounterOpts":   "counter",
	"GaugeOpts":     "gauge",
	"HistogramOpts": "histogram",
	"SummaryOpts":   "summary",
	"UntypedOpts":   "untyped",
}

// metric is one metric a binary serves.
type metric struct {
	name, kind, help string
	labels           []string
	at               string
}

// metrics is docs/reference/metrics.md: every metric the binaries define
// through client_golang's options (prometheus.CounterOpts{Name: ...} and
// the like, with the labels of the NewXxxVec call that takes them), by the
// binaries linking the package that defines it.
func metrics(s *source) (string, error) {
	byBinary := map[string][]metric{}
	runtime := map[string]bool{}
	var failed []string
	s.eachFile(func(f *file, p *pkg) {
		labels := map[*ast.CompositeLit][]string{}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch {
			case f.imports[x.Name] == collectorsPkg && (sel.Sel.Name == "NewGoCollector" || sel.Sel.Name == "NewProcessCollector"):
				for _, b := range s.linkedBy[p.path] {
					runtime[b] = true
				}
			case f.imports[x.Name] == prometheusPkg && strings.HasSuffix(sel.Sel.Name, "Vec") && len(call.Args) == 2:
				if lit, ok := call.Args[0].(*ast.CompositeLit); ok {
					l, err := s.strs(f, p, call.Args[1])
					if err != nil {
						failed = append(failed, err.Error())
					}
					labels[lit] = l
				}
			}
			return true
		})
		ast.Inspect(f.ast, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			kind := metricTypes[sel.Sel.Name]
			if !ok || f.imports[x.Name] != prometheusPkg || kind == "" {
				return true
			}
			m := metric{kind: kind, labels: labels[lit], at: s.fset.Position(lit.Pos()).String()}
			var parts [3]string // namespace, subsystem, name
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				i := slices.Index([]string{"Namespace", "Subsystem", "Name", "Help"}, key.Name)
				if i < 0 {
					continue
				}
				v, err := s.str(f, p, kv.Value)
				if err != nil {
					failed = append(failed, err.Error())
					continue
				}
				if i == 3 {
					m.help = v
				} else {
					parts[i] = v
				}
			}
			var name []string
			for _, part := range parts {
				if part != "" {
					name = append(name, part)
				}
			}
			m.name = strings.Join(name, "_")
			if m.name == "" || m.help == "" {
				failed = append(failed, fmt.Sprintf("%s: a metric without a constant name and help", m.at))
				return true
			}
			for _, b := range s.linkedBy[p.path] {
				byBinary[b] = append(byBinary[b], m)
			}
			return true
		})
	})
	if len(failed) > 0 {
		return "", fmt.Errorf("metrics: %s", strings.Join(failed, "; "))
	}

	pg := newPage("Metrics", "the client_golang options of every metric the binaries under cmd/ define")
	pg.para("Every metric edgeota's binaries serve on `/metrics`, in Prometheus' text format: the controller on " +
		"`--metrics-bind-address` (`:8080`), the node agent on its own port (`/metrics`, for viewers once its authentication is on).")
	for _, b := range s.binaries {
		ms := byBinary[b]
		if len(ms) == 0 {
			continue
		}
		slices.SortFunc(ms, func(a, b metric) int { return strings.Compare(a.name, b.name) })
		ms = slices.CompactFunc(ms, func(a, b metric) bool { return a.name == b.name })
		pg.WriteString("## " + b + "\n\n")
		if runtime[b] {
			pg.para("Besides these, the Go runtime's `go_*` and the process's `process_*` metrics (client_golang's collectors).")
		}
		var rows [][]string
		for _, m := range ms {
			var labels []string
			for _, l := range m.labels {
				labels = append(labels, code(l))
			}
			rows = append(rows, []string{fmt.Sprintf(`<a id="%s"></a>%s`, anchorID(m.name), code(m.name)), m.kind, strings.Join(labels, ", "), prose(m.help)})
		}
		pg.table([]string{"Metric", "Type", "Labels", "Meaning"}, rows)
	}
	return pg.String(), nil
}

// eachFile calls fn for every file of every package, in a fixed order.
func (s *source) eachFile(fn func(*file, *pkg)) {
	paths := make([]string, 0, len(s.pkgs))
	for p := range s.pkgs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, path := range paths {
		for _, f := range s.pkgs[path].files {
			fn(f, s.pkgs[path])
		}
	}
}
