package record

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
)

// A record is a journal of segments. Each write of the store is one
// segment: the keys that changed since the last (a node's entry as JSON, an
// empty value for an entry removed, metaKey for the meta), at the next
// sequence number. A merge replaces a run of consecutive segments with one
// covering their sequence numbers; a rewrite writes every key in one
// segment covering every number so far. Read back, segments apply in order,
// the later value of a key winning.
//
// A segment is stored in one ConfigMap, or in several (its parts) when its
// keys exceed partBytes, each holding some of its keys: named
// edgeota-rollout-<DaemonSet UID>-<revision>-<from>-<to>[-<i>of<n>], its
// data one binaryData key, entriesKey, holding "key\tvalue\n" lines,
// gzipped. A segment lacking a part (a write cut short) is not read; one
// whose range lies within another's (a merge whose sources are not deleted
// yet) is not read either.

const (
	// entriesKey is the binaryData key of a record ConfigMap.
	entriesKey = "entries"
	// partBytes bounds a part's keys and values before compression, so that
	// even data that does not compress fits the API's 1 MiB. Entries
	// compress about fourfold: a part stores 100–200 KiB.
	partBytes = 512 << 10
	// fanIn is how many segments of one level a merge takes: a key is
	// rewritten once per level, and a record holds at most fanIn-1
	// segments of each.
	fanIn = 8
)

// segmentPrefix is what every record ConfigMap of a DaemonSet's target
// revision is named with, legacy ones included.
func segmentPrefix(dsUID types.UID, target decision.Target) string {
	return fmt.Sprintf("edgeota-rollout-%s-%d-", dsUID, target.Number)
}

// partName is the name of part i of n of the segment from..to.
func partName(dsUID types.UID, target decision.Target, from, to uint64, i, n int) string {
	name := fmt.Sprintf("%s%d-%d", segmentPrefix(dsUID, target), from, to)
	if n > 1 {
		name += fmt.Sprintf("-%dof%d", i, n)
	}
	return name
}

// nameInfo is what a record ConfigMap's name says.
type nameInfo struct {
	// legacy: a ConfigMap of an older edgeota's layout, one key per node
	// (edgeota-rollout-<uid>-<revision>-[p]<i>).
	legacy   bool
	from, to uint64
	part, of int
}

// parseName reads the name of a ConfigMap of the DaemonSet's record of
// target; ok is false for any other name.
func parseName(name string, dsUID types.UID, target decision.Target) (nameInfo, bool) {
	rest, ok := strings.CutPrefix(name, segmentPrefix(dsUID, target))
	if !ok {
		return nameInfo{}, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) == 1 {
		_, ok := number(strings.TrimPrefix(fields[0], "p"))
		return nameInfo{legacy: true}, ok
	}
	if len(fields) > 3 {
		return nameInfo{}, false
	}
	from, okFrom := number(fields[0])
	to, okTo := number(fields[1])
	info := nameInfo{from: from, to: to, part: 0, of: 1}
	if !okFrom || !okTo || from > to {
		return nameInfo{}, false
	}
	if len(fields) == 3 {
		i, n, found := strings.Cut(fields[2], "of")
		part, okI := number(i)
		of, okN := number(n)
		if !found || !okI || !okN || of < 2 || part >= of {
			return nameInfo{}, false
		}
		info.part, info.of = int(part), int(of)
	}
	return info, true
}

// number reads a sequence number written as partName writes it.
func number(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}

// level is a segment's place among merges: a write is level 0, a merge of
// fanIn segments of level L covers fanIn times their sequence numbers and
// is level L+1.
func level(from, to uint64) int {
	span := to - from + 1
	return (bits.Len64(span) - 1) / bits.Len64(fanIn-1) // log base fanIn, fanIn a power of two
}

// line is one key of a segment with its value; an empty value removes the
// key.
type line struct {
	key, value string
}

// gzipWriters keeps compressors between writes: a new one allocates about
// 800 KB of state, which cost each write ahead of a deletion of pods some
// 0.2 ms and the heap as much garbage; one reset costs a few microseconds.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// encodeParts splits lines (in key order) into parts of at most partBytes
// before compression, each gzipped.
func encodeParts(lines []line) ([][]byte, error) {
	var parts [][]byte
	for start := 0; start < len(lines) || start == 0; {
		end, size := start, 0
		for end < len(lines) && (end == start || size+len(lines[end].key)+len(lines[end].value)+2 <= partBytes) {
			size += len(lines[end].key) + len(lines[end].value) + 2
			end++
		}
		var buf bytes.Buffer
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(&buf)
		w := bufio.NewWriter(zw)
		for _, l := range lines[start:end] {
			w.WriteString(l.key)
			w.WriteByte('\t')
			w.WriteString(l.value)
			w.WriteByte('\n')
		}
		err := w.Flush()
		if err == nil {
			err = zw.Close()
		}
		gzipWriters.Put(zw)
		if err != nil {
			return nil, err
		}
		parts = append(parts, buf.Bytes())
		if end == len(lines) {
			break
		}
		start = end
	}
	return parts, nil
}

// decodePart reads the lines of one part.
func decodePart(cm *corev1.ConfigMap) ([]line, error) {
	data, ok := cm.BinaryData[entriesKey]
	if !ok {
		return nil, fmt.Errorf("no %s", entriesKey)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	// A part holds at most partBytes (one larger entry aside): anything
	// much larger is not the store's, and is not inflated further.
	raw, err := io.ReadAll(io.LimitReader(zr, 2*partBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > 2*partBytes {
		return nil, fmt.Errorf("more than %d bytes inflated", 2*partBytes)
	}
	var lines []line
	for text := range strings.SplitSeq(string(raw), "\n") {
		if text == "" {
			continue
		}
		key, value, found := strings.Cut(text, "\t")
		if !found || key == "" {
			return nil, fmt.Errorf("line %q is not key<TAB>value", text)
		}
		// The key outlives the part (the ledger and the segment keep it):
		// a copy of its own, not a slice of the whole part's text.
		lines = append(lines, line{strings.Clone(key), value})
	}
	return lines, nil
}

// sortLines orders lines by key: names alike compress together, and a
// segment's bytes do not depend on a map's order.
func sortLines(lines []line) {
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.key, b.key) })
}
