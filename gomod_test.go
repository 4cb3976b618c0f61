package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGoModAsksImportersForLittle: the go directive names a Go release
// without a patch beyond .0, so importing Sluice never forces a program onto
// a newer 1.26 patch; the toolchain line pins this repository's own builds;
// the archived YAML module stays out. A dependency upgrade that raises the
// floor fails here, and the choice (hold the dependency or raise the floor
// for every importer) is made on purpose.
func TestGoModAsksImportersForLittle(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(data)
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go directive")
	}
	if !regexp.MustCompile(`^1\.\d+(\.0)?$`).MatchString(goLine[1]) {
		t.Errorf("go directive %s pins a patch release; importers would be forced up to it", goLine[1])
	}
	if !regexp.MustCompile(`(?m)^toolchain go1\.\d+\.\d+$`).MatchString(mod) {
		t.Error("go.mod has no toolchain line for the repository's own builds")
	}
	if strings.Contains(mod, "gopkg.in/yaml.v3") {
		t.Error("go.mod requires gopkg.in/yaml.v3, which is archived; use go.yaml.in/yaml/v3")
	}
}
