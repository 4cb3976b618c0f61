// Package themes holds every colour and style the console draws with, in
// one place: a semantic Palette (what a colour means, not what it is) is
// turned once into a Theme of lipgloss styles. Palettes: dark, light,
// high-contrast and mono; NO_COLOR (any non-empty value) means mono.
//
// The package knows nothing of jobs, stores or screens beyond the names of
// job states, which it colours.
package themes

import (
	"image/color"
	"slices"
	"sort"
	"strings"

	"charm.land/bubbles/v2/textarea"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

// Palette names the colours of a theme by what they mean. A nil colour
// means the terminal's own (no colour sequence is written).
type Palette struct {
	Name string
	// Dark says whether the palette is meant for a dark background.
	Dark bool
	// Mono draws with attributes only (bold, reverse, underline).
	Mono bool
	// Basic uses only the 16 basic ANSI colours (see ForProfile).
	Basic bool

	Text, Muted, Subtle     color.Color
	Accent, AccentText      color.Color
	Border                  color.Color
	SelectionBg, Selection  color.Color
	Marked                  color.Color
	Error, Warning, Success color.Color
	Info                    color.Color
	BadgeBg, BadgeText      color.Color

	// States colours each job state by name ("archived", "completed", ...).
	States map[string]color.Color

	// JSON colours a pretty-printed payload.
	JSONKey, JSONString, JSONNumber, JSONBool, JSONNull, JSONPunct color.Color
}

// Theme is a palette turned into styles. Every style the console uses is a
// field here; screens never build colours of their own.
type Theme struct {
	Palette Palette

	App        lipgloss.Style
	Title      lipgloss.Style // the product name in the header
	HeaderInfo lipgloss.Style // backend, actor
	Badge      lipgloss.Style // READ-ONLY and other header badges
	Tab        lipgloss.Style
	TabActive  lipgloss.Style
	TabCount   lipgloss.Style

	TableHeader lipgloss.Style
	Row         lipgloss.Style
	RowCursor   lipgloss.Style
	RowMarked   lipgloss.Style // the mark column of a marked row
	Cell        lipgloss.Style // secondary cells (ids, ages)
	CellError   lipgloss.Style // the last-error cell
	CellWait    lipgloss.Style // that cell of a waiting job: what it waits for
	Muted       lipgloss.Style
	Subtle      lipgloss.Style
	Bold        lipgloss.Style
	Accent      lipgloss.Style

	Border    lipgloss.Style // the rule between list and sheet
	SheetHead lipgloss.Style // section titles in the detail sheet
	Label     lipgloss.Style // field labels in the detail sheet
	Value     lipgloss.Style
	ErrorText lipgloss.Style
	DiffDel   lipgloss.Style // a line only the older side has (attempts compared)
	DiffAdd   lipgloss.Style // a line only the newer side has
	WarnText  lipgloss.Style
	OKText    lipgloss.Style
	InfoText  lipgloss.Style

	Filter      lipgloss.Style // the filter line prompt
	FilterError lipgloss.Style // an inline query error
	Status      lipgloss.Style // the bottom status line
	HelpKey     lipgloss.Style
	HelpDesc    lipgloss.Style
	HelpSep     lipgloss.Style
	HelpTitle   lipgloss.Style

	Toast      lipgloss.Style
	ToastError lipgloss.Style
	Banner     lipgloss.Style // a failing store or API
	Dialog     lipgloss.Style
	DialogHead lipgloss.Style
	Danger     lipgloss.Style // the count in a confirmation
	// Scheduled is a bulk run waiting for its start time: its status on
	// :operations and its start in the bulk preview.
	Scheduled lipgloss.Style

	ProgressFull  color.Color
	ProgressEmpty color.Color

	JSONKey, JSONString, JSONNumber, JSONBool, JSONNull, JSONPunct lipgloss.Style

	Editor textarea.Styles // the payload editor inside the console

	states map[string]lipgloss.Style
	groups map[string]lipgloss.Style
}

// State is the style of a job state's name and count.
func (t *Theme) State(state string) lipgloss.Style {
	if s, ok := t.states[state]; ok {
		return s
	}
	return t.Muted
}

// GroupStatus is the style of an error group's triage status ("open",
// "reopened", "resolved", "ignored"): a group that came back stands out
// most, an open one as a warning, a closed one recedes.
func (t *Theme) GroupStatus(status string) lipgloss.Style {
	if s, ok := t.groups[status]; ok {
		return s
	}
	return t.Muted
}

// Names lists the built-in themes.
func Names() []string { return []string{"dark", "light", "high-contrast", "mono"} }

// ByName returns a built-in theme; ok is false for an unknown name.
func ByName(name string) (*Theme, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "dark":
		return New(DarkPalette()), true
	case "light":
		return New(LightPalette()), true
	case "high-contrast", "highcontrast", "hc":
		return New(HighContrastPalette()), true
	case "mono", "none", "nocolor", "no-color":
		return New(MonoPalette()), true
	}
	return nil, false
}

// NoColor reports whether the environment asks for no colour: NO_COLOR set
// to any non-empty value (https://no-color.org).
func NoColor(getenv func(string) string) bool {
	return getenv != nil && getenv("NO_COLOR") != ""
}

// Resolve picks the theme for a session: mono when NO_COLOR is set, else
// the named one, else dark or light by the terminal's background.
func Resolve(name string, darkBackground bool, getenv func(string) string) *Theme {
	if NoColor(getenv) {
		return New(MonoPalette())
	}
	if t, ok := ByName(name); ok {
		return t
	}
	if darkBackground {
		return New(DarkPalette())
	}
	return New(LightPalette())
}

func hex(s string) color.Color { return lipgloss.Color(s) }

// DarkPalette is the default palette, for dark backgrounds.
func DarkPalette() Palette {
	return Palette{
		Name: "dark", Dark: true,
		Text: hex("#E4E4E7"), Muted: hex("#8B8B96"), Subtle: hex("#5C5C66"),
		Accent: hex("#7DD3FC"), AccentText: hex("#0B1220"),
		Border:      hex("#3F3F46"),
		SelectionBg: hex("#334155"), Selection: hex("#F8FAFC"),
		Marked: hex("#F0ABFC"),
		Error:  hex("#F87171"), Warning: hex("#FACC15"), Success: hex("#4ADE80"), Info: hex("#60A5FA"),
		BadgeBg: hex("#B45309"), BadgeText: hex("#FFFBEB"),
		States: map[string]color.Color{
			"scheduled":   hex("#A78BFA"),
			"available":   hex("#60A5FA"),
			"running":     hex("#22D3EE"),
			"retryable":   hex("#FB923C"),
			"completed":   hex("#4ADE80"),
			"archived":    hex("#F87171"),
			"quarantined": hex("#FACC15"),
			"undecodable": hex("#F472B6"),
			"cancelled":   hex("#A1A1AA"),
		},
		JSONKey: hex("#7DD3FC"), JSONString: hex("#A3E635"), JSONNumber: hex("#FDBA74"),
		JSONBool: hex("#F0ABFC"), JSONNull: hex("#A1A1AA"), JSONPunct: hex("#71717A"),
	}
}

// LightPalette is for light backgrounds.
func LightPalette() Palette {
	return Palette{
		Name: "light", Dark: false,
		Text: hex("#18181B"), Muted: hex("#52525B"), Subtle: hex("#A1A1AA"),
		Accent: hex("#0369A1"), AccentText: hex("#FFFFFF"),
		Border:      hex("#D4D4D8"),
		SelectionBg: hex("#DBEAFE"), Selection: hex("#0F172A"),
		Marked: hex("#A21CAF"),
		Error:  hex("#B91C1C"), Warning: hex("#A16207"), Success: hex("#15803D"), Info: hex("#1D4ED8"),
		BadgeBg: hex("#B45309"), BadgeText: hex("#FFFFFF"),
		States: map[string]color.Color{
			"scheduled":   hex("#6D28D9"),
			"available":   hex("#1D4ED8"),
			"running":     hex("#0E7490"),
			"retryable":   hex("#C2410C"),
			"completed":   hex("#15803D"),
			"archived":    hex("#B91C1C"),
			"quarantined": hex("#A16207"),
			"undecodable": hex("#BE185D"),
			"cancelled":   hex("#52525B"),
		},
		JSONKey: hex("#0369A1"), JSONString: hex("#4D7C0F"), JSONNumber: hex("#C2410C"),
		JSONBool: hex("#A21CAF"), JSONNull: hex("#52525B"), JSONPunct: hex("#71717A"),
	}
}

// HighContrastPalette uses the 16 basic colours at full strength, for
// low-vision use and poor terminals.
func HighContrastPalette() Palette {
	white, black := lipgloss.BrightWhite, lipgloss.Black
	return Palette{
		Name: "high-contrast", Dark: true,
		Text: white, Muted: lipgloss.White, Subtle: lipgloss.White,
		Accent: lipgloss.BrightCyan, AccentText: black,
		Border:      white,
		SelectionBg: lipgloss.BrightYellow, Selection: black,
		Marked: lipgloss.BrightMagenta,
		Error:  lipgloss.BrightRed, Warning: lipgloss.BrightYellow, Success: lipgloss.BrightGreen, Info: lipgloss.BrightBlue,
		BadgeBg: lipgloss.BrightRed, BadgeText: white,
		States: map[string]color.Color{
			"scheduled":   lipgloss.BrightMagenta,
			"available":   lipgloss.BrightBlue,
			"running":     lipgloss.BrightCyan,
			"retryable":   lipgloss.BrightYellow,
			"completed":   lipgloss.BrightGreen,
			"archived":    lipgloss.BrightRed,
			"quarantined": lipgloss.BrightYellow,
			"undecodable": lipgloss.BrightMagenta,
			"cancelled":   white,
		},
		JSONKey: lipgloss.BrightCyan, JSONString: lipgloss.BrightGreen, JSONNumber: lipgloss.BrightYellow,
		JSONBool: lipgloss.BrightMagenta, JSONNull: white, JSONPunct: white,
	}
}

// MonoPalette draws no colour at all: attributes carry the meaning.
func MonoPalette() Palette {
	return Palette{Name: "mono", Dark: true, Mono: true, States: map[string]color.Color{}}
}

// New turns a palette into styles.
func New(p Palette) *Theme {
	s := lipgloss.NewStyle
	fg := func(c color.Color) lipgloss.Style {
		if c == nil {
			return s()
		}
		return s().Foreground(c)
	}
	t := &Theme{Palette: p}
	t.App = fg(p.Text)
	t.Title = fg(p.Accent).Bold(true)
	t.HeaderInfo = fg(p.Muted)
	t.Badge = s().Bold(true).Padding(0, 1)
	t.Tab = fg(p.Muted)
	t.TabActive = s().Bold(true).Underline(true)
	t.TabCount = s()
	t.TableHeader = fg(p.Muted).Bold(true)
	t.Row = fg(p.Text)
	t.RowCursor = s().Bold(true)
	t.RowMarked = fg(p.Marked).Bold(true)
	t.Cell = fg(p.Muted)
	t.CellError = fg(p.Error)
	t.CellWait = fg(p.Info)
	t.Muted = fg(p.Muted)
	t.Subtle = fg(p.Subtle)
	t.Bold = s().Bold(true)
	t.Accent = fg(p.Accent)
	t.Border = fg(p.Border)
	t.SheetHead = fg(p.Accent).Bold(true)
	t.Label = fg(p.Muted)
	t.Value = fg(p.Text)
	t.ErrorText = fg(p.Error)
	t.DiffDel, t.DiffAdd = fg(p.Error), fg(p.Success)
	t.Editor = textarea.Styles{Cursor: textarea.CursorStyle{Color: p.Accent}}
	t.Editor.Focused = textarea.StyleState{
		Base: s(), Text: fg(p.Text), LineNumber: fg(p.Subtle), CursorLineNumber: fg(p.Accent),
		CursorLine: s(), EndOfBuffer: fg(p.Subtle), Placeholder: fg(p.Muted), Prompt: fg(p.Muted),
		Selection: s().Reverse(true),
	}
	t.Editor.Blurred = t.Editor.Focused
	t.WarnText = fg(p.Warning)
	t.OKText = fg(p.Success)
	t.InfoText = fg(p.Info)
	t.Filter = fg(p.Accent).Bold(true)
	t.FilterError = fg(p.Error)
	t.Status = fg(p.Muted)
	t.HelpKey = fg(p.Accent).Bold(true)
	t.HelpDesc = fg(p.Muted)
	t.HelpSep = fg(p.Subtle)
	t.HelpTitle = fg(p.Text).Bold(true).Underline(true)
	t.Toast = s().Border(lipgloss.RoundedBorder()).Padding(0, 1)
	t.ToastError = t.Toast
	t.Banner = s().Bold(true).Padding(0, 1)
	t.Dialog = s().Border(lipgloss.RoundedBorder()).Padding(0, 1)
	t.DialogHead = s().Bold(true)
	t.Danger = fg(p.Error).Bold(true)
	t.Scheduled = fg(p.Info).Italic(true)
	t.JSONKey, t.JSONString, t.JSONNumber = fg(p.JSONKey), fg(p.JSONString), fg(p.JSONNumber)
	t.JSONBool, t.JSONNull, t.JSONPunct = fg(p.JSONBool), fg(p.JSONNull), fg(p.JSONPunct)
	t.ProgressFull, t.ProgressEmpty = p.Accent, p.Border

	if p.Mono {
		t.RowCursor = s().Reverse(true)
		t.TabActive = s().Reverse(true).Bold(true)
		t.Badge = t.Badge.Reverse(true)
		t.Banner = t.Banner.Reverse(true)
		t.RowMarked = s().Bold(true)
		t.CellError = s()
		t.CellWait = s()
		t.Scheduled = s().Italic(true)
		t.Danger = s().Bold(true).Underline(true)
		t.ErrorText = s().Bold(true)
		t.Toast = t.Toast.BorderStyle(lipgloss.NormalBorder())
		t.ToastError = t.Toast.Bold(true)
	} else {
		t.RowCursor = s().Background(p.SelectionBg).Foreground(p.Selection).Bold(true)
		t.TabActive = t.TabActive.Foreground(p.Text)
		t.Badge = t.Badge.Background(p.BadgeBg).Foreground(p.BadgeText)
		t.Banner = t.Banner.Background(p.Error).Foreground(p.AccentText)
		t.Toast = t.Toast.BorderForeground(p.Success)
		t.ToastError = t.Toast.BorderForeground(p.Error)
		t.Dialog = t.Dialog.BorderForeground(p.Accent)
	}
	t.states = make(map[string]lipgloss.Style, len(p.States))
	for name, c := range p.States {
		t.states[name] = fg(c)
	}
	if p.Mono {
		// Dead and held states stand out by weight, not colour.
		t.states["archived"] = s().Bold(true)
		t.states["quarantined"] = s().Bold(true).Underline(true)
		t.states["undecodable"] = s().Bold(true)
	}
	t.groups = map[string]lipgloss.Style{
		"open": fg(p.Warning), "reopened": fg(p.Error).Bold(true), "resolved": fg(p.Success), "ignored": fg(p.Subtle),
	}
	if p.Mono {
		// A group that came back stands out by weight, as a dead state.
		t.groups = map[string]lipgloss.Style{"open": s(), "reopened": s().Bold(true), "resolved": s(), "ignored": s()}
	}
	return t
}

// ForProfile adapts a theme to a terminal's colour profile. On a
// 16-colour terminal the palette's colours are replaced by the basic ANSI
// colours that keep their meaning (downsampling the hex colours would
// turn yellows red, so archived and quarantined would look alike); other
// profiles keep the theme as it is and let the renderer downsample.
func (t *Theme) ForProfile(p colorprofile.Profile) *Theme {
	if p != colorprofile.ANSI || t.Palette.Mono || t.Palette.Basic {
		return t
	}
	return New(BasicPalette(t.Palette))
}

// BasicPalette is p drawn with the 16 basic ANSI colours.
func BasicPalette(p Palette) Palette {
	b := p
	b.Basic = true
	if p.Dark {
		b.Text, b.Muted, b.Subtle = nil, lipgloss.White, lipgloss.BrightBlack
		b.Accent, b.AccentText, b.Border = lipgloss.BrightCyan, lipgloss.Black, lipgloss.BrightBlack
		b.SelectionBg, b.Selection, b.Marked = lipgloss.Blue, lipgloss.BrightWhite, lipgloss.BrightMagenta
		b.Error, b.Warning, b.Success, b.Info = lipgloss.BrightRed, lipgloss.BrightYellow, lipgloss.BrightGreen, lipgloss.BrightBlue
		b.BadgeBg, b.BadgeText = lipgloss.Yellow, lipgloss.Black
		b.States = map[string]color.Color{
			"scheduled": lipgloss.BrightMagenta, "available": lipgloss.BrightBlue, "running": lipgloss.BrightCyan,
			"retryable": lipgloss.Yellow, "completed": lipgloss.BrightGreen, "archived": lipgloss.BrightRed,
			"quarantined": lipgloss.BrightYellow, "undecodable": lipgloss.Magenta, "cancelled": lipgloss.White,
		}
		b.JSONKey, b.JSONString, b.JSONNumber = lipgloss.BrightCyan, lipgloss.BrightGreen, lipgloss.Yellow
		b.JSONBool, b.JSONNull, b.JSONPunct = lipgloss.BrightMagenta, lipgloss.White, lipgloss.BrightBlack
		return b
	}
	b.Text, b.Muted, b.Subtle = nil, lipgloss.BrightBlack, lipgloss.White
	b.Accent, b.AccentText, b.Border = lipgloss.Blue, lipgloss.BrightWhite, lipgloss.White
	b.SelectionBg, b.Selection, b.Marked = lipgloss.Cyan, lipgloss.Black, lipgloss.Magenta
	b.Error, b.Warning, b.Success, b.Info = lipgloss.Red, lipgloss.Yellow, lipgloss.Green, lipgloss.Blue
	b.BadgeBg, b.BadgeText = lipgloss.Yellow, lipgloss.Black
	b.States = map[string]color.Color{
		"scheduled": lipgloss.Magenta, "available": lipgloss.Blue, "running": lipgloss.Cyan,
		"retryable": lipgloss.Yellow, "completed": lipgloss.Green, "archived": lipgloss.Red,
		"quarantined": lipgloss.Yellow, "undecodable": lipgloss.Magenta, "cancelled": lipgloss.BrightBlack,
	}
	b.JSONKey, b.JSONString, b.JSONNumber = lipgloss.Blue, lipgloss.Green, lipgloss.Yellow
	b.JSONBool, b.JSONNull, b.JSONPunct = lipgloss.Magenta, lipgloss.BrightBlack, lipgloss.BrightBlack
	return b
}

// StateNames lists the states a palette colours, sorted, for tests.
func (p Palette) StateNames() []string {
	names := make([]string, 0, len(p.States))
	for n := range p.States {
		names = append(names, n)
	}
	sort.Strings(names)
	return slices.Clip(names)
}
