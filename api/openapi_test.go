package api

import (
	_ "embed"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

// TestOpenAPIMatchesRouter fails when the router and openapi.yaml
// disagree on the routes (paths and methods), or when the spec leaves the
// Idempotency-Key out of a mutation.
func TestOpenAPIMatchesRouter(t *testing.T) {
	t.Parallel()
	var spec struct {
		OpenAPI string                          `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openapiYAML, &spec); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(spec.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", spec.OpenAPI)
	}
	var documented []string
	for path, ops := range spec.Paths {
		for method, node := range ops {
			if method == "parameters" {
				continue
			}
			pattern := strings.ToUpper(method) + " " + path
			documented = append(documented, pattern)
			if method != "get" && !strings.Contains(nodeText(t, &node), "#/components/parameters/IdempotencyKey") {
				t.Errorf("%s: the spec does not require Idempotency-Key", pattern)
			}
		}
	}
	_, srv := setup(t, ServerOptions{})
	routes := srv.Routes()
	slices.Sort(documented)
	slices.Sort(routes)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("openapi.yaml documents %s, which the router does not serve", d)
		}
	}
}

func nodeText(t *testing.T, n *yaml.Node) string {
	t.Helper()
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
