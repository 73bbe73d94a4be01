package main

import (
	"strings"
	"testing"
)

// rowNamed finds the row whose figure starts with prefix.
func rowNamed(t *testing.T, tb table, prefix string) row {
	t.Helper()
	for _, r := range tb.rows {
		if strings.HasPrefix(r.figure, prefix) {
			return r
		}
	}
	t.Fatalf("table %q has no row %q", tb.title, prefix)
	return row{}
}

func TestTableWritesDashesForEmptyCells(t *testing.T) {
	var b strings.Builder
	table{title: "1. Example", rows: []row{{figure: "f", edgeota: "1 s", met: "met"}}, notes: []string{"a note"}}.write(&b)
	want := "\n### 1. Example\n\n" +
		"| figure | edgeota | baseline | ratio | target | met? |\n" +
		"| --- | --- | --- | --- | --- | --- |\n" +
		"| f | 1 s | – | – | – | met |\n" +
		"\n- a note\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
