package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/themes"
)

// Payloads and metadata are pretty-printed once, off the UI goroutine, into
// sanitized lines; colour is added only to the lines on screen, each cut
// to the sheet's width first, so a 16 MiB payload costs what a screenful
// costs to draw.
//
// Whatever the payload's shape, what is printed is bounded: indentation
// stops growing past maxIndentDepth levels (json.Indent's grows with the
// depth, so a payload of 10,000 nested objects, 60 KB, printed 100 MB of
// spaces), and the sheet keeps at most maxPayloadLines lines, then says
// how it was cut.
const (
	maxIndentDepth  = 32
	maxPayloadLines = 200_000
)

// prettyJSON indents raw JSON as json.Indent does with two spaces, with
// no line indented past maxIndentDepth levels (the text stays the same
// JSON); text that is not JSON is returned as is.
func prettyJSON(raw []byte) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}")
	}
	if !json.Valid(raw) {
		return raw
	}
	out, _ := indentJSON(raw, -1)
	return out
}

// prettyJSONLines is prettyJSON split into sanitized lines, at most
// maxPayloadLines of them and a last one saying the rest was cut.
func prettyJSONLines(raw []byte) []string {
	if len(bytes.TrimSpace(raw)) == 0 || !json.Valid(raw) {
		return termtext.Lines(string(prettyJSON(raw)))
	}
	out, cut := indentJSON(raw, maxPayloadLines)
	lines := termtext.Lines(string(out))
	if cut {
		lines = append(lines, fmt.Sprintf("… cut at %s lines (%s bytes in all): sluice jobs show ID -o json prints it whole",
			commas(maxPayloadLines), commas(int64(len(raw)))))
	}
	return lines
}

// indentJSON indents valid JSON raw like json.Indent(dst, raw, "", "  "),
// indenting no line past maxIndentDepth levels. With maxLines >= 0 it
// stops after that many lines and reports that it did.
func indentJSON(raw []byte, maxLines int) (out []byte, cut bool) {
	b := make([]byte, 0, len(raw)+len(raw)/4)
	depth, lines := 0, 1
	newline := func() bool {
		if maxLines >= 0 && lines >= maxLines {
			return false
		}
		lines++
		b = append(b, '\n')
		for range min(depth, maxIndentDepth) {
			b = append(b, ' ', ' ')
		}
		return true
	}
	// next is the index of the first byte at or after i that is not
	// white space.
	next := func(i int) int {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
		return i
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			j := i + 1
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			b = append(b, raw[i:min(j+1, len(raw))]...)
			i = j
		case '{', '[':
			b = append(b, c)
			if k := next(i + 1); k < len(raw) && (raw[k] == '}' || raw[k] == ']') {
				b = append(b, raw[k])
				i = k
				continue
			}
			depth++
			if !newline() {
				return b, true
			}
		case '}', ']':
			depth--
			if !newline() {
				return b, true
			}
			b = append(b, c)
		case ',':
			b = append(b, c)
			if !newline() {
				return b, true
			}
		case ':':
			b = append(b, ':', ' ')
		default:
			b = append(b, c)
		}
	}
	return b, false
}

// clipPlain cuts plain (unstyled, sanitized) text to w cells.
func clipPlain(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if len(s) <= w && termtext.Plain(s) {
		return s
	}
	return clip(s, w)
}

// colorJSONLine colours one line of pretty-printed JSON. It reads tokens
// leniently: a line cut in the middle of a string is still coloured.
func colorJSONLine(line string, t *themes.Theme) string {
	if t.Palette.Mono {
		return line
	}
	var b strings.Builder
	b.Grow(len(line) * 2)
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	b.WriteString(line[:i])
	emit := func(st lipgloss.Style, s string) {
		if s != "" {
			b.WriteString(st.Render(s))
		}
	}
	for i < len(line) {
		c := line[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(line) {
				if line[j] == '\\' && j+1 < len(line) {
					j += 2
					continue
				}
				if line[j] == '"' {
					j++
					break
				}
				j++
			}
			tok := line[i:j]
			k := j
			for k < len(line) && line[k] == ' ' {
				k++
			}
			if k < len(line) && line[k] == ':' {
				emit(t.JSONKey, tok)
			} else {
				emit(t.JSONString, tok)
			}
			i = j
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(line) && strings.IndexByte("0123456789.eE+-", line[j]) >= 0 {
				j++
			}
			emit(t.JSONNumber, line[i:j])
			i = j
		case strings.HasPrefix(line[i:], "true"):
			emit(t.JSONBool, "true")
			i += 4
		case strings.HasPrefix(line[i:], "false"):
			emit(t.JSONBool, "false")
			i += 5
		case strings.HasPrefix(line[i:], "null"):
			emit(t.JSONNull, "null")
			i += 4
		case strings.IndexByte("{}[],:", c) >= 0:
			emit(t.JSONPunct, string(c))
			i++
		default:
			j := i + 1
			for j < len(line) && strings.IndexByte("\"{}[],:", line[j]) < 0 {
				j++
			}
			b.WriteString(line[i:j])
			i = j
		}
	}
	return b.String()
}
