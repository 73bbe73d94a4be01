package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// subcommands are the binaries' subcommands with flag sets of their own,
// documented apart: a binary's --help does not list them.
var subcommands = map[string][]string{"ota-server": {"prepare-state-dir"}}

// flagDoc is one flag as a binary's --help shows it.
type flagDoc struct {
	name, short, typ, def, usage string
}

// flags is docs/reference/flags.md: every flag of every binary under cmd/
// (and of its subcommands), as the binary's own --help prints its flag set,
// built here from the checkout. klog's logging flags and kubectl's
// connection flags are named, not repeated.
func flags(s *source, goTool, root string) (string, error) {
	dir, err := os.MkdirTemp("", "docgen-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	build := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/...: %w: %s", err, out)
	}
	klogFlags, connectionFlags := externalFlags()

	pg := newPage("Command-line flags", "the flag sets of the binaries under cmd/, as each one's --help prints them")
	pg.para("Every flag of edgeota's binaries, with its default. Go's flag syntax: `-flag`, `--flag`, `-flag=value` and `-flag value` " +
		"(a boolean takes `-flag=false`). Every binary also answers `--version` (version, commit, build date, Go version).")
	for _, b := range s.binaries {
		for _, sub := range append([]string{""}, subcommands[b]...) {
			name := strings.TrimSpace(b + " " + sub)
			args := []string{"--help"}
			if sub != "" {
				args = []string{sub, "--help"}
			}
			docs, err := helpFlags(filepath.Join(dir, b), args, dir)
			if err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			var own [][]string
			var logging, connection []string
			for _, d := range docs {
				switch {
				case klogFlags[d.name]:
					logging = append(logging, code(dashes(d.name)))
				case connectionFlags[d.name]:
					connection = append(connection, code(dashes(d.name)))
				default:
					flagName := code(dashes(d.name))
					if d.short != "" {
						flagName = code("-"+d.short) + ", " + flagName
					}
					def := code(zeroDefault(d))
					if def == "" {
						def = "—"
					}
					own = append(own, []string{fmt.Sprintf(`<a id="%s"></a>%s`, anchorID(name+"-"+d.name), flagName), def, prose(d.usage)})
				}
			}
			pg.WriteString("## " + name + "\n\n")
			pg.table([]string{"Flag", "Default", "Meaning"}, own)
			if len(logging) > 0 {
				pg.para("klog's logging flags apply too (logs are structured): " + strings.Join(logging, ", ") + ".")
			}
			if len(connection) > 0 {
				pg.para("kubectl's connection flags apply too, as in kubectl: " + strings.Join(connection, ", ") + ".")
			}
		}
	}
	return pg.String(), nil
}

// zeroDefault is the flag's default as --help shows it or, since --help
// leaves a zero default out, the zero value of its type; "—" for an empty
// string or a value of no known type.
func zeroDefault(d flagDoc) string {
	switch {
	case d.def != "":
		return d.def
	case d.typ == "":
		return "false"
	case d.typ == "duration":
		return "0s"
	case slices.Contains([]string{"int", "int64", "uint", "uint64", "float", "float64"}, d.typ):
		return "0"
	}
	return ""
}

// dashes is a flag's name as the manual spells it: --name, or -x for one
// letter.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// externalFlags are the names of the flags klog adds to a flag set and of
// kubectl's connection flags (client-go's clientcmd).
func externalFlags() (map[string]bool, map[string]bool) {
	k := map[string]bool{}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { k[f.Name] = true })
	c := map[string]bool{}
	pfs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	clientcmd.BindOverrideFlags(&clientcmd.ConfigOverrides{}, pfs, clientcmd.RecommendedConfigOverrideFlags(""))
	pfs.VisitAll(func(f *pflag.Flag) { c[f.Name] = true })
	return k, c
}

// helpFlags runs the binary with args (its --help) in an empty environment,
// so that no default comes from this machine's, and reads its flags.
func helpFlags(binary string, args []string, home string) ([]flagDoc, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TZ=UTC"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(binary), strings.Join(args, " "), err, out.String())
	}
	docs := parseHelp(out.String())
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s %s printed no flags:\n%s", filepath.Base(binary), strings.Join(args, " "), out.String())
	}
	return docs, nil
}

var (
	// goFlag is a flag of Go's flag package in PrintDefaults: "  -name type",
	// its usage on the lines after, each after four spaces and a tab; a
	// one-letter one's usage after a tab on the same line.
	goFlag = regexp.MustCompile(`^  -([^\s-][^\s]*)(?: ([^\s]+))?(?:\t(.*))?$`)
	// goUsage continues a Go flag's usage.
	goUsage = regexp.MustCompile(`^    \t(.*)$`)
	// pflagFlag is a pflag flag in FlagUsages: "  -w, --watch", or
	// "      --timeout duration", then two spaces or more and its usage.
	pflagFlag = regexp.MustCompile(`^  (?:-(\S), |    )--([^\s\[]+)(?: (\S+))?(?:\[=[^\]]*\])?(?:\s{2,}(.*))?$`)
	// quotedDefault and plainDefault end a usage with the default a flag
	// set appends: quoted for strings, as it is for the rest.
	quotedDefault = regexp.MustCompile(` \(default ("(?:[^"\\]|\\.)*")\)$`)
	plainDefault  = regexp.MustCompile(` \(default ([^()]+)\)$`)
)

// parseHelp reads the flags of a --help output, printed by Go's flag
// package or by pflag (as PrintDefaults prints them), after any usage text.
func parseHelp(out string) []flagDoc {
	var docs []flagDoc
	var cur *flagDoc
	pflagIndent := 0
	for _, line := range strings.Split(out, "\n") {
		if m := pflagFlag.FindStringSubmatch(line); m != nil {
			docs = append(docs, flagDoc{short: m[1], name: m[2], typ: m[3], usage: m[4]})
			cur = &docs[len(docs)-1]
			pflagIndent = len(line) - len(m[4])
			continue
		}
		if m := goFlag.FindStringSubmatch(line); m != nil {
			docs = append(docs, flagDoc{name: m[1], typ: m[2], usage: m[3]})
			cur = &docs[len(docs)-1]
			continue
		}
		switch m := goUsage.FindStringSubmatch(line); {
		case cur == nil:
		case m != nil:
			cur.usage = strings.TrimSpace(cur.usage + "\n" + m[1])
		case pflagIndent > 0 && strings.TrimSpace(line) != "" && len(line) > pflagIndent && strings.TrimSpace(line[:pflagIndent]) == "":
			cur.usage += "\n" + strings.TrimSpace(line)
		default:
			cur = nil
		}
	}
	for i := range docs {
		d := &docs[i]
		if m := quotedDefault.FindStringSubmatch(d.usage); m != nil {
			d.def, _ = strconv.Unquote(m[1])
			d.usage = strings.TrimSuffix(d.usage, m[0])
		} else if m := plainDefault.FindStringSubmatch(d.usage); m != nil && d.typ != "string" && (d.typ != "" || m[1] == "true") {
			d.def = m[1]
			d.usage = strings.TrimSuffix(d.usage, m[0])
		}
	}
	return slices.Clip(docs)
}
