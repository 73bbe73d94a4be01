// Package choice reads a value that must be one of a fixed list of names,
// such as a flag's mode, so that every such value is refused the same way:
// with the value and every valid name.
package choice

import (
	"fmt"
	"strings"
)

// Parse returns the member of valid whose name is s, or an error quoting s
// and naming every member, in order ("want a, b or c").
func Parse[T ~string](s string, valid []T) (T, error) {
	for _, v := range valid {
		if string(v) == s {
			return v, nil
		}
	}
	var zero T
	return zero, fmt.Errorf("%q: want %s", s, list(valid))
}

// list names the members as a sentence: "a", "a or b", "a, b or c".
func list[T ~string](valid []T) string {
	names := make([]string, len(valid))
	for i, v := range valid {
		names[i] = string(v)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
