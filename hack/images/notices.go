package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// goEnvironment is where the Go toolchain keeps the standard library's and
// the modules' sources, whose license files the images carry.
type goEnvironment struct {
	GOROOT     string
	GOMODCACHE string
}

func goEnv() (goEnvironment, error) {
	var env goEnvironment
	out, err := exec.Command("go", "env", "-json", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		return env, fmt.Errorf("go env: %w", err)
	}
	return env, json.Unmarshal(out, &env)
}

// modulePath reads the module path from a go.mod.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(data)
	if path == "" {
		return "", fmt.Errorf("%s has no module line", gomod)
	}
	return path, nil
}

// noticeFile is one license or notice file to ship.
type noticeFile struct {
	path string // inside the image, below /licenses/third_party
	data []byte
}

// goNotices is the name /licenses/third_party gives the Go standard library
// and runtime, linked into every binary.
const goNotices = "go"

// modulesFile lists, in /licenses/third_party, every module linked in with
// its version, as `go version -m` prints them.
const modulesFile = "MODULES"

// thirdPartyNotices returns the license notices of everything linked into
// the binary at path: the Go standard library (GOROOT) and every module
// dependency its build information records, from the module cache. A module
// without a license file fails the build: shipping it would break its terms
// or ours.
func thirdPartyNotices(path string, env goEnvironment) ([]noticeFile, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	files, err := licenseFiles(env.GOROOT, goNotices)
	if err != nil {
		return nil, fmt.Errorf("the Go standard library (%s): %w", env.GOROOT, err)
	}
	var modules bytes.Buffer
	fmt.Fprintf(&modules, "%s %s\n", goNotices, info.GoVersion)
	for _, dep := range info.Deps {
		m := dep
		if dep.Replace != nil {
			m = dep.Replace
		}
		dir, err := moduleDir(env.GOMODCACHE, m.Path, m.Version)
		if err != nil {
			return nil, err
		}
		found, err := licenseFiles(dir, dep.Path)
		if err != nil {
			return nil, fmt.Errorf("module %s %s: %w", m.Path, m.Version, err)
		}
		files = append(files, found...)
		fmt.Fprintf(&modules, "%s %s\n", dep.Path, m.Version)
	}
	files = append(files, noticeFile{path: modulesFile, data: modules.Bytes()})
	return files, nil
}

// moduleDir is where the module cache holds a module version's files.
func moduleDir(modcache, path, version string) (string, error) {
	if version == "" {
		return "", fmt.Errorf("module %s is replaced by a local directory: build from released modules", path)
	}
	escPath, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return "", err
	}
	return filepath.Join(modcache, escPath+"@"+escVersion), nil
}

// licensePrefixes are how license and notice files are named at a module's
// root, upper-cased: LICENSE, LICENSE.txt, LICENCE.md, COPYING, NOTICE,
// PATENTS (golang.org/x), ...
var licensePrefixes = []string{"LICENSE", "LICENCE", "COPYING", "NOTICE", "PATENTS", "UNLICENSE"}

// licenseFiles reads the license and notice files at dir's top level,
// placed below name in the image.
func licenseFiles(dir, name string) ([]noticeFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []noticeFile
	for _, e := range entries {
		upper := strings.ToUpper(e.Name())
		if !e.Type().IsRegular() || !slices.ContainsFunc(licensePrefixes, func(p string) bool { return strings.HasPrefix(upper, p) }) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, noticeFile{path: name + "/" + e.Name(), data: data})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no license file (%s...) in %s", strings.Join(licensePrefixes, ", "), dir)
	}
	return files, nil
}
