package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strings"
)

// annotations is docs/reference/annotations.md: every annotation key of
// package rollout (its constants named *Annotation), a table per const
// block, titled by the block's doc comment.
func annotations(s *source) (string, error) {
	p, err := s.pkgNamed("rollout")
	if err != nil {
		return "", err
	}
	// A key is a constant named *Annotation whose value is a qualified key
	// (prefix/name); the reasons named *Annotation are not.
	blocks, err := s.blocks(p, func(name string) bool {
		return strings.HasSuffix(name, "Annotation") && !strings.HasPrefix(name, "Reason")
	})
	if err != nil {
		return "", err
	}
	pg := newPage("Annotations", "the constants of package rollout (rollout/annotations.go)")
	pg.para("Every annotation key edgeota reads or writes, with what it means and its default. " +
		"Keys under `apps.openyurt.io/` are spelt as OpenYurt and ACK Edge spell them, so that their manifests work unchanged; " +
		"the rest are edgeota's own. Each key's row has an anchor: `annotations.md#` and the key, lower case, each run of punctuation a hyphen " +
		"(`#edgeota-io-max-failed`).")
	for _, b := range blocks {
		if err := undocumented(b); err != nil {
			return "", err
		}
		title, rest := firstSentence(b.doc)
		if title == "" {
			title = "Annotations"
		}
		pg.WriteString("## " + title + "\n\n")
		pg.para(prose(rest))
		var rows [][]string
		for _, c := range b.consts {
			rows = append(rows, []string{fmt.Sprintf(`<a id="%s"></a>%s`, anchorID(c.value), code(c.value)), meaning(c.name, c.doc)})
		}
		pg.table([]string{"Key", "Meaning"}, rows)
	}
	return pg.String(), nil
}

// conditions is docs/reference/conditions.md: the OTA pod condition types
// and their reasons, from package podcondition.
func conditions(s *source) (string, error) {
	p, err := s.pkgNamed("podcondition")
	if err != nil {
		return "", err
	}
	blocks, err := s.blocks(p, func(string) bool { return true })
	if err != nil {
		return "", err
	}
	pg := newPage("Pod conditions and their reasons", "the constants of package podcondition (podcondition/names.go)")
	pg.para("The OTA conditions the controller and the node agent write on DaemonSet pods, " +
		"and the reasons they carry. A condition's message names the revision it is about: `controllerrevision: <hash>` " +
		"(a failed pre-pull adds the cause after `; `).")
	for _, b := range blocks {
		if err := undocumented(b); err != nil {
			return "", err
		}
		blockIntro(pg, b, len(blocks))
		var rows [][]string
		for _, c := range b.consts {
			kind := "reason"
			if !strings.HasPrefix(c.name, "Reason") {
				kind = "condition type"
			}
			rows = append(rows, []string{code(c.value), kind, meaning(c.name, c.doc)})
		}
		pg.table([]string{"Name", "Kind", "Meaning"}, rows)
	}
	return pg.String(), nil
}

// events is docs/reference/events.md: the reasons of the events the
// controller records (package rollout's constants named Reason*, and any
// other constant a recorder is called with), each with its type as the
// calls that record it say.
func events(s *source) (string, error) {
	p, err := s.pkgNamed("rollout")
	if err != nil {
		return "", err
	}
	blocks, err := s.blocks(p, func(name string) bool { return strings.HasPrefix(name, "Reason") })
	if err != nil {
		return "", err
	}
	types, others := s.eventTypes()
	pg := newPage("Events", "the constants of package rollout (rollout/reasons.go) and the calls that record them")
	pg.para("Every reason of the events edgeota's controller records (`kubectl describe ds`, `kubectl get events`), " +
		"with the type it records each with.")
	for _, b := range blocks {
		if err := undocumented(b); err != nil {
			return "", err
		}
		blockIntro(pg, b, len(blocks))
		var rows [][]string
		for _, c := range b.consts {
			rows = append(rows, []string{code(c.value), eventType(types[c.value]), meaning(c.name, c.doc)})
		}
		pg.table([]string{"Reason", "Type", "Meaning"}, rows)
	}
	if len(others) > 0 {
		pg.WriteString("## Recorded with reasons declared elsewhere\n\n")
		var rows [][]string
		for _, c := range others {
			rows = append(rows, []string{code(c.value), eventType(types[c.value]), meaning(c.name, c.doc)})
		}
		pg.table([]string{"Reason", "Type", "Meaning"}, rows)
	}
	return pg.String(), nil
}

// blockIntro introduces a const block's table: its doc comment, as a
// paragraph when the page has only this block, else as a heading (its
// first sentence) and a paragraph.
func blockIntro(pg *page, b constBlock, blocks int) {
	if blocks == 1 {
		pg.para(prose(b.doc))
		return
	}
	title, rest := firstSentence(b.doc)
	pg.WriteString("## " + title + "\n\n")
	pg.para(prose(rest))
}

func eventType(ts []string) string {
	if len(ts) == 0 {
		return "—"
	}
	return strings.Join(ts, ", ")
}

// undocumented fails on a constant without a doc comment: its row would
// say nothing.
func undocumented(b constBlock) error {
	for _, c := range b.consts {
		if strings.TrimSpace(c.doc) == "" {
			return fmt.Errorf("%s: %s has no doc comment, which the reference table shows: write one", c.at, c.name)
		}
	}
	return nil
}

// recorderMethods are client-go's EventRecorder methods, and where each
// takes the event's type.
var recorderMethods = map[string]int{"Event": 1, "Eventf": 1, "AnnotatedEventf": 2}

// eventTypes finds, in the source of every binary, which event types each
// reason is recorded with: a call passing both a reason constant and
// corev1.EventTypeNormal or EventTypeWarning; a reason held in a variable
// the function passes with a type; or a reason passed to a function of the
// module that records with a single type. It also returns the reasons
// declared outside package rollout that a recorder is called with.
func (s *source) eventTypes() (map[string][]string, []constant) {
	// A module function recording events with one type, by name.
	fixed := map[string]string{}
	s.eachFunc(func(f *file, p *pkg, fn *ast.FuncDecl) {
		var seen []string
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if t := s.eventTypeOf(f, n); t != "" && !slices.Contains(seen, t) {
				seen = append(seen, t)
			}
			return true
		})
		if len(seen) == 1 {
			fixed[fn.Name.Name] = seen[0]
		}
	})
	types := map[string][]string{}
	add := func(reason, t string) {
		if t != "" && !slices.Contains(types[reason], t) {
			types[reason] = append(types[reason], t)
			slices.Sort(types[reason])
		}
	}
	var others []constant
	s.eachFunc(func(f *file, p *pkg, fn *ast.FuncDecl) {
		// Reasons held in local variables (reason := rollout.ReasonX).
		held := map[string][]string{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && (a.Tok == token.DEFINE || a.Tok == token.ASSIGN) && len(a.Lhs) == len(a.Rhs) {
				for i, rhs := range a.Rhs {
					if id, ok := a.Lhs[i].(*ast.Ident); ok {
						if r := s.reasonOf(f, p, rhs); r != "" {
							held[id.Name] = append(held[id.Name], r)
						}
					}
				}
			}
			return true
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var reasons []string
			t := ""
			for _, a := range call.Args {
				if r := s.reasonOf(f, p, a); r != "" {
					reasons = append(reasons, r)
				} else if id, ok := a.(*ast.Ident); ok {
					reasons = append(reasons, held[id.Name]...)
				}
				if et := s.eventTypeOf(f, a); et != "" {
					t = et
				}
			}
			if t == "" {
				t = fixed[calleeName(call)]
			}
			for _, r := range reasons {
				add(r, t)
			}
			// A recorder called with a constant declared outside rollout.
			if i, ok := recorderMethods[calleeName(call)]; ok && len(call.Args) > i+1 {
				if c := s.constantOf(f, p, call.Args[i+1]); c != nil && c.pkg.path != module+"/rollout" {
					v, err := s.str(c.file, c.pkg, c.value)
					if err == nil && !slices.ContainsFunc(others, func(o constant) bool { return o.value == v }) {
						others = append(others, constant{name: c.name, value: v, doc: c.doc()})
					}
				}
			}
			return true
		})
	})
	slices.SortFunc(others, func(a, b constant) int { return strings.Compare(a.value, b.value) })
	return types, others
}

// eachFunc calls fn for every function of every package, in a fixed order.
func (s *source) eachFunc(fn func(*file, *pkg, *ast.FuncDecl)) {
	paths := make([]string, 0, len(s.pkgs))
	for p := range s.pkgs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, path := range paths {
		p := s.pkgs[path]
		for _, f := range p.files {
			for _, d := range f.ast.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					fn(f, p, fd)
				}
			}
		}
	}
}

// reasonOf is the value of a reason constant of package rollout that e
// names, or "".
func (s *source) reasonOf(f *file, p *pkg, e ast.Expr) string {
	c := s.constantOf(f, p, e)
	if c == nil || c.pkg.path != module+"/rollout" || !strings.HasPrefix(c.name, "Reason") || c.value == nil {
		return ""
	}
	v, _ := s.str(c.file, c.pkg, c.value)
	return v
}

// constantOf is the module's constant e names, if any.
func (s *source) constantOf(f *file, p *pkg, e ast.Expr) *decl {
	switch e := e.(type) {
	case *ast.Ident:
		return p.consts[e.Name]
	case *ast.SelectorExpr:
		return s.imported(f, e, true)
	}
	return nil
}

// eventTypeOf is "Normal" or "Warning" when n is core/v1's EventTypeNormal
// or EventTypeWarning.
func (s *source) eventTypeOf(f *file, n ast.Node) string {
	sel, ok := n.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok || f.imports[x.Name] != "k8s.io/api/core/v1" {
		return ""
	}
	switch sel.Sel.Name {
	case "EventTypeNormal":
		return "Normal"
	case "EventTypeWarning":
		return "Warning"
	}
	return ""
}

// calleeName is the name of the function or method a call calls.
func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}
