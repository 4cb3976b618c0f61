package tui

import (
	"bytes"
	"encoding/json"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/themes"
)

// Payloads and metadata are pretty-printed once, off the UI goroutine, into
// sanitized lines; colour is added only to the lines on screen, each cut
// to the sheet's width first, so a 16 MiB payload costs what a screenful
// costs to draw.

// prettyJSON indents raw JSON; text that is not JSON is returned as is.
func prettyJSON(raw []byte) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	b.Grow(len(raw) + len(raw)/4)
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return raw
	}
	return b.Bytes()
}

// prettyJSONLines is prettyJSON split into sanitized lines.
func prettyJSONLines(raw []byte) []string {
	return termtext.Lines(string(prettyJSON(raw)))
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
