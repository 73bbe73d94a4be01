package main

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// document is what the checker reads of one Markdown file: the anchors it
// defines, the links it makes, its e2e markers and its YAML examples.
type document struct {
	anchors map[string]bool
	links   []link
	markers []marker
	// yamlBlocks are the lines of the fences opening its ```yaml blocks,
	// each with whether an e2e marker names the scenario that runs it.
	yamlBlocks []yamlBlock
}

// link is one link target as written, on its line.
type link struct {
	line   int
	target string
}

// marker is one `e2e:` comment: the scenarios it names.
type marker struct {
	line  int
	names []string
}

// yamlBlock is a ```yaml code block: an example manifest.
type yamlBlock struct {
	line   int
	marked bool
}

var (
	// fence opens or closes a fenced code block: up to three spaces, then
	// three or more backticks or tildes, then the info string.
	fence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")
	// atxHeading is "# Title" to "###### Title", closing #s optional.
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	// setextUnderline turns the line above into a heading.
	setextUnderline = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	// inlineLink is [text](target "title") and ![alt](target).
	inlineLink = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// refDefinition is [label]: target.
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// htmlTarget is an href or src attribute.
	htmlTarget = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	// htmlAnchor is an element's id or name attribute: an anchor.
	htmlAnchor = regexp.MustCompile(`(?i)<a\s[^>]*\b(?:id|name)\s*=\s*"([^"]+)"`)
	// htmlTag is any tag, dropped from a heading's text.
	htmlTag = regexp.MustCompile(`<[^>]*>`)
	// e2eMarker names the end-to-end scenarios that run an example:
	// <!-- e2e: TestA, TestB/subtest --> in Markdown, # e2e: TestA in YAML.
	e2eMarker = regexp.MustCompile(`\be2e:\s*((?:Test[A-Za-z0-9_]*(?:/[A-Za-z0-9_-]+)?[,\s]*)+)`)
	// scenarioName is one name of a marker.
	scenarioName = regexp.MustCompile(`Test[A-Za-z0-9_]*(?:/[A-Za-z0-9_-]+)?`)
	// listItem starts a list item: a setext underline of dashes after one is
	// a thematic break, not a heading.
	listItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s`)
)

// parseMarkdown reads a Markdown file the way GitHub renders it, as far as
// links and anchors go: code blocks and code spans hold no links, headings
// get GitHub's anchors (see slugger), and <a id/name> elements add theirs.
func parseMarkdown(text string) *document {
	d := &document{anchors: map[string]bool{}}
	var slugs slugger
	lines := strings.Split(text, "\n")
	var open string // the fence of the code block we are in, if any
	prev := ""      // the previous line outside code, for setext headings
	lastMarker := -1
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimRight(raw, "\r")
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
				if strings.EqualFold(m[2], "yaml") || strings.EqualFold(m[2], "yml") {
					d.yamlBlocks = append(d.yamlBlocks, yamlBlock{line: n, marked: lastMarker >= 0 && precededBy(lines, i, lastMarker)})
				}
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1]:
				open = ""
			}
			prev = ""
			continue
		}
		if open != "" {
			// Inside a code block: an e2e marker written as a YAML comment
			// marks the block it is in.
			if e2eMarker.MatchString(line) && len(d.yamlBlocks) > 0 && strings.HasPrefix(strings.TrimSpace(line), "#") {
				d.yamlBlocks[len(d.yamlBlocks)-1].marked = true
				d.addMarker(n, line)
			}
			continue
		}
		if strings.Contains(line, "<!--") && e2eMarker.MatchString(line) {
			d.addMarker(n, line)
			lastMarker = i
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			d.anchors[slugs.slug(headingText(m[2]))] = true
			prev = ""
			continue
		}
		if setextUnderline.MatchString(line) && strings.TrimSpace(prev) != "" && !listItem.MatchString(prev) && !strings.Contains(prev, "|") {
			d.anchors[slugs.slug(headingText(strings.TrimSpace(prev)))] = true
			prev = ""
			continue
		}
		prev = line
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			d.links = append(d.links, link{n, m[1]})
			continue
		}
		plain := stripCodeSpans(line)
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, link{n, m[2]})
		}
		for _, m := range htmlTarget.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, link{n, m[1]})
		}
	}
	return d
}

// precededBy reports whether the non-blank line just before line i is line
// marker: an e2e comment right above a code block is that block's.
func precededBy(lines []string, i, marker int) bool {
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) == "" {
			continue
		}
		return j == marker
	}
	return false
}

func (d *document) addMarker(line int, text string) {
	var names []string
	for _, m := range e2eMarker.FindAllStringSubmatch(text, -1) {
		names = append(names, scenarioName.FindAllString(m[1], -1)...)
	}
	d.markers = append(d.markers, marker{line, names})
}

// stripCodeSpans blanks out `code spans` (of any number of backticks), in
// which nothing is a link.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		run := 1
		for i+run < len(line) && line[i+run] == '`' {
			run++
		}
		closing := strings.Index(line[i+run:], strings.Repeat("`", run))
		if closing < 0 {
			b.WriteString(line[i : i+run])
			i += run
			continue
		}
		end := i + run + closing + run
		b.WriteString(strings.Repeat(" ", end-i))
		i = end
	}
	return b.String()
}

// headingText is a heading's text as GitHub renders it: links and images
// reduced to their text, code spans to their content, emphasis and HTML tags
// dropped.
func headingText(s string) string {
	s = inlineLink.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "!") {
			return ""
		}
		return inlineLink.FindStringSubmatch(m)[1]
	})
	s = htmlTag.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "`", "")
	s = strings.ReplaceAll(s, "*", "")
	return emphasisUnderscore.ReplaceAllString(s, "$1$2")
}

// emphasisUnderscore is an underscore that opens or closes emphasis (at a
// word's edge); one inside a word (snake_case) stays.
var emphasisUnderscore = regexp.MustCompile(`(^|\W)_+|_+(\W|$)`)

// slugger gives headings GitHub's anchors (github-slugger): lower case,
// punctuation and symbols dropped, each space a hyphen; a repeated anchor
// gets -1, -2, ... in order.
type slugger struct{ seen map[string]int }

func (s *slugger) slug(heading string) string {
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	slug := base
	for {
		if _, taken := s.seen[slug]; !taken {
			break
		}
		s.seen[base]++
		slug = base + "-" + strconv.Itoa(s.seen[base])
	}
	s.seen[slug] = 0
	return slug
}
