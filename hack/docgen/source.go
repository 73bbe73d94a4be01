package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// module is edgeota's module path: the packages whose source is read.
const module = "github.com/edgeota/edgeota"

// source is the Go source of the packages the binaries under cmd/ link, as
// `go list` finds them (build constraints applied), parsed with comments.
type source struct {
	fset *token.FileSet
	// pkgs are the module's packages, by import path.
	pkgs map[string]*pkg
	// binaries are the binaries under cmd/, by name; linkedBy the binaries
	// linking each package.
	binaries []string
	linkedBy map[string][]string
}

// pkg is one parsed package of the module.
type pkg struct {
	path  string
	name  string
	files []*file
	// consts and vars are its package-level declarations, by name.
	consts map[string]*decl
	vars   map[string]*decl
}

// file is one parsed file, with how it names its imports.
type file struct {
	name    string
	ast     *ast.File
	imports map[string]string // local name → import path
}

// decl is one name of a package-level const or var declaration.
type decl struct {
	name  string
	spec  *ast.ValueSpec
	value ast.Expr // nil when the spec repeats the one above (iota)
	block *ast.GenDecl
	file  *file
	pkg   *pkg
}

// doc is the declaration's doc comment: its own, or its block's when the
// block declares it alone.
func (d *decl) doc() string {
	if d.spec.Doc != nil {
		return d.spec.Doc.Text()
	}
	if len(d.block.Specs) == 1 && d.block.Doc != nil {
		return d.block.Doc.Text()
	}
	return ""
}

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Module     *struct{ Path string }
}

// load lists and parses the packages the binaries under root/cmd link.
func load(goTool, root string) (*source, error) {
	cmds, err := filepath.Glob(filepath.Join(root, "cmd", "*", "*.go"))
	if err != nil {
		return nil, err
	}
	s := &source{fset: token.NewFileSet(), pkgs: map[string]*pkg{}, linkedBy: map[string][]string{}}
	for _, c := range cmds {
		if b := filepath.Base(filepath.Dir(c)); !slices.Contains(s.binaries, b) {
			s.binaries = append(s.binaries, b)
		}
	}
	slices.Sort(s.binaries)
	if len(s.binaries) == 0 {
		return nil, errors.New("no binaries under cmd/: run from the repository's root")
	}
	for _, b := range s.binaries {
		pkgs, err := goList(goTool, root, "./cmd/"+b)
		if err != nil {
			return nil, err
		}
		for _, l := range pkgs {
			if l.Module == nil || l.Module.Path != module {
				continue
			}
			s.linkedBy[l.ImportPath] = append(s.linkedBy[l.ImportPath], b)
			if _, done := s.pkgs[l.ImportPath]; done {
				continue
			}
			p, err := s.parse(l)
			if err != nil {
				return nil, err
			}
			s.pkgs[l.ImportPath] = p
		}
	}
	return s, nil
}

// goList runs `go list -deps -json` on pattern.
func goList(goTool, root, pattern string) ([]listed, error) {
	cmd := exec.Command(goTool, "list", "-deps", "-json=ImportPath,Name,Dir,GoFiles,Module", pattern)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", pattern, err, stderr.String())
	}
	var all []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			return all, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list %s: %w", pattern, err)
		}
		all = append(all, l)
	}
}

func (s *source) parse(l listed) (*pkg, error) {
	p := &pkg{path: l.ImportPath, name: l.Name, consts: map[string]*decl{}, vars: map[string]*decl{}}
	for _, name := range l.GoFiles {
		f, err := parser.ParseFile(s.fset, filepath.Join(l.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		fl := &file{name: path.Join(strings.TrimPrefix(strings.TrimPrefix(l.ImportPath, module), "/"), name), ast: f, imports: map[string]string{}}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			local := path.Base(ip)
			if v := strings.TrimPrefix(local, "v"); v != local && isDigits(v) {
				local = path.Base(path.Dir(ip)) // .../foo/v2 is package foo
			}
			if imp.Name != nil {
				local = imp.Name.Name
			}
			fl.imports[local] = ip
		}
		p.files = append(p.files, fl)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					dc := &decl{name: n.Name, spec: vs, block: g, file: fl, pkg: p}
					if i < len(vs.Values) {
						dc.value = vs.Values[i]
					}
					if g.Tok == token.CONST {
						p.consts[n.Name] = dc
					} else {
						p.vars[n.Name] = dc
					}
				}
			}
		}
	}
	return p, nil
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// pkgNamed returns the module's package of import path rel (relative to
// the module), which some binary must link.
func (s *source) pkgNamed(rel string) (*pkg, error) {
	p := s.pkgs[module+"/"+rel]
	if p == nil {
		return nil, fmt.Errorf("package %s: no binary under cmd/ links it", rel)
	}
	return p, nil
}

// str evaluates a constant string expression of file f: literals, the
// module's constants (of this package or another), +, parentheses and
// conversions.
func (s *source) str(f *file, p *pkg, e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.ParenExpr:
		return s.str(f, p, e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := s.str(f, p, e.X)
			if err != nil {
				return "", err
			}
			y, err := s.str(f, p, e.Y)
			return x + y, err
		}
	case *ast.CallExpr:
		if len(e.Args) == 1 { // a conversion, string(x) or T(x)
			return s.str(f, p, e.Args[0])
		}
	case *ast.Ident:
		if d := p.consts[e.Name]; d != nil && d.value != nil {
			return s.str(d.file, d.pkg, d.value)
		}
	case *ast.SelectorExpr:
		if d := s.imported(f, e, true); d != nil && d.value != nil {
			return s.str(d.file, d.pkg, d.value)
		}
	}
	return "", fmt.Errorf("%s: not a constant string edgeota's docs can read", s.fset.Position(e.Pos()))
}

// imported resolves pkg.Name in f to the module's declaration, if any.
func (s *source) imported(f *file, e *ast.SelectorExpr, constant bool) *decl {
	x, ok := e.X.(*ast.Ident)
	if !ok {
		return nil
	}
	p := s.pkgs[f.imports[x.Name]]
	if p == nil {
		return nil
	}
	if constant {
		return p.consts[e.Sel.Name]
	}
	return p.vars[e.Sel.Name]
}

// strs evaluates a []string{...} literal, or a variable holding one.
func (s *source) strs(f *file, p *pkg, e ast.Expr) ([]string, error) {
	switch x := e.(type) {
	case *ast.Ident:
		if d := p.vars[x.Name]; d != nil && d.value != nil {
			return s.strs(d.file, d.pkg, d.value)
		}
	case *ast.SelectorExpr:
		if d := s.imported(f, x, false); d != nil && d.value != nil {
			return s.strs(d.file, d.pkg, d.value)
		}
	case *ast.CompositeLit:
		var out []string
		for _, el := range x.Elts {
			v, err := s.str(f, p, el)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: not a list of constant strings edgeota's docs can read", s.fset.Position(e.Pos()))
}

// constBlock is one const ( ... ) block of a package: its doc comment and
// the string constants it declares, in order.
type constBlock struct {
	doc    string
	consts []constant
}

// constant is one exported string constant and its doc comment.
type constant struct {
	name, value, doc string
	at               token.Position
}

// blocks returns p's const blocks, in file and source order, keeping the
// exported string constants keep accepts; blocks left empty are dropped.
func (s *source) blocks(p *pkg, keep func(name string) bool) ([]constBlock, error) {
	var out []constBlock
	for _, f := range p.files {
		for _, d := range f.ast.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			var b constBlock
			if g.Doc != nil {
				b.doc = g.Doc.Text()
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					c := p.consts[n.Name]
					if !n.IsExported() || !keep(n.Name) || c.value == nil {
						continue
					}
					v, err := s.str(c.file, p, c.value)
					if err != nil {
						return nil, err
					}
					b.consts = append(b.consts, constant{name: n.Name, value: v, doc: c.doc(), at: s.fset.Position(n.Pos())})
				}
			}
			if len(b.consts) > 0 {
				out = append(out, b)
			}
		}
	}
	return out, nil
}
