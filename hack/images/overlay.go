package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
)

const (
	// overlayDir is where, below the output directory, the overlay goes.
	overlayDir = "deploy"
	// deployImagePrefix is how deploy/'s manifests name the images:
	// edgeota/NAME, tagged by its kustomization.yaml.
	deployImagePrefix = "edgeota/"
)

// writeOverlay writes OUT/deploy/kustomization.yaml: deploy/ with every
// image named by the exact tag and digest just built (kubelet pulls the
// digest; the tag tells people what it is). It returns the file's path.
func writeOverlay(out, deployDir string, built []builtImage) (string, error) {
	dir := filepath.Join(out, overlayDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	absDeploy, err := filepath.Abs(deployDir)
	if err != nil {
		return "", err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	base, err := filepath.Rel(absDir, absDeploy)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString("# Written by make images (hack/images): deploy/ with the images it built,\n")
	b.WriteString("# by tag and digest. Load the images (docs/operations/deploying.md), then\n")
	b.WriteString("# kubectl apply -k this directory.\n")
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	fmt.Fprintf(&b, "  - %s\nimages:\n", filepath.ToSlash(base))
	for _, img := range built {
		fmt.Fprintf(&b, "  - name: %s%s\n    newName: %s\n    newTag: %s\n    digest: %s\n", deployImagePrefix, img.name, img.repo, img.tag, img.digest)
	}
	file := filepath.Join(dir, "kustomization.yaml")
	return file, os.WriteFile(file, b.Bytes(), 0o644)
}

// report prints each image's digest and its size per platform.
func report(w io.Writer, built []builtImage) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tPLATFORM\tCOMPRESSED\tUNPACKED\tDIGEST")
	for _, img := range built {
		fmt.Fprintf(tw, "%s\tindex\t\t\t%s\n", img.ref(), img.digest)
		for _, p := range img.platforms {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", p.platform, mib(p.compressed), mib(p.uncompressed), p.digest)
		}
	}
	tw.Flush()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
