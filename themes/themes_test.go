package themes

import (
	"strings"
	"testing"
)

func TestNoColorMeansMono(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"1", "true", "0", "yes"} {
		env := func(k string) string {
			if k == "NO_COLOR" {
				return v
			}
			return ""
		}
		if th := Resolve("dark", true, env); !th.Palette.Mono {
			t.Errorf("NO_COLOR=%q: theme %s, want mono", v, th.Palette.Name)
		}
	}
	if th := Resolve("", false, func(string) string { return "" }); th.Palette.Name != "light" {
		t.Errorf("light background: %s", th.Palette.Name)
	}
	if th := Resolve("", true, func(string) string { return "" }); th.Palette.Name != "dark" {
		t.Errorf("dark background: %s", th.Palette.Name)
	}
}

func TestMonoWritesNoColour(t *testing.T) {
	t.Parallel()
	th := New(MonoPalette())
	for _, s := range []string{
		th.State("archived").Render("archived"),
		th.RowCursor.Render("row"),
		th.ErrorText.Render("err"),
		th.Badge.Render("READ-ONLY"),
		th.JSONKey.Render(`"k"`),
	} {
		// SGR colour parameters: 3x/4x/9x/10x or 38;/48;.
		for _, bad := range []string{"[3", "[4", "[9", ";3", ";4", "38;", "48;"} {
			if strings.Contains(s, bad) && !strings.Contains(s, "[4m") && !strings.Contains(s, ";4m") {
				t.Errorf("mono style wrote a colour: %q", s)
			}
		}
	}
}

func TestEveryThemeHasStates(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		th, ok := ByName(name)
		if !ok {
			t.Fatalf("theme %s missing", name)
		}
		if th.Palette.Mono {
			continue
		}
		for _, s := range []string{"scheduled", "available", "running", "retryable", "completed", "archived", "quarantined", "undecodable", "cancelled"} {
			if th.Palette.States[s] == nil {
				t.Errorf("%s: no colour for %s", name, s)
			}
		}
	}
	if _, ok := ByName("solarized"); ok {
		t.Error("unknown theme accepted")
	}
}
