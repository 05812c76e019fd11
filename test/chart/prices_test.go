package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentrewind/agentrewind/internal/engine/price"
)

// TestChartPricesReachTheManager: the prices value becomes a ConfigMap the manager mounts and reads
// with --price-file, and what it reads there (price.Parse, as the manager does) is the value's
// prices to the micro-dollar, Helm's number formatting included. A change of prices rolls the
// manager; without prices nothing is mounted and the built-in list prices apply.
func TestChartPricesReachTheManager(t *testing.T) {
	full := filepath.Join(chartDir(), "ci", "full-values.yaml")
	r := render(t, "-f", full)
	d := manager(t, r)
	f := flags(t, d)
	path := f["price-file"]
	if path == "" {
		t.Fatal("prices set, and no --price-file")
	}
	c := managerContainer(t, d)
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if strings.HasPrefix(path, c.VolumeMounts[i].MountPath+"/") {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly {
		t.Fatalf("--price-file=%s is on no read-only mount: %+v", path, c.VolumeMounts)
	}
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	var cm corev1.ConfigMap
	get(t, r, "ConfigMap", cmName, &cm)
	file := strings.TrimPrefix(path, mount.MountPath+"/")
	got, err := price.Parse([]byte(cm.Data[file]))
	if err != nil {
		t.Fatalf("the manager would refuse the rendered %s:\n%s\n%v", file, cm.Data[file], err)
	}
	want := map[price.Key]price.Price{
		{Provider: "anthropic", Model: "claude-sonnet-4-5"}: {Input: 3_000_000, Output: 15_000_000, CacheWrite: 3_750_000, CacheRead: 300_000},
		{Provider: "openai", Model: "corp-finetune"}:        {Input: 3_200_000, Output: 12_800_000, CacheWrite: 3_200_000, CacheRead: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("prices the manager reads (-want +got):\n%s", d)
	}

	// Another price rolls the manager's pods.
	before := d.Spec.Template.Annotations["checksum/prices"]
	changed := manager(t, render(t, "-f", full, "--set", "prices.openai.corp-finetune.output=13"))
	if after := changed.Spec.Template.Annotations["checksum/prices"]; before == "" || after == before {
		t.Errorf("checksum/prices %q before and %q after a price changed", before, after)
	}

	// Without prices: no ConfigMap, no flag, no mount.
	def := render(t)
	if _, ok := flags(t, manager(t, def))["price-file"]; ok || len(def.kinds("ConfigMap")) != 0 {
		t.Errorf("prices unset, and the chart renders --price-file or a ConfigMap")
	}
}

// TestChartSchemaRefusesABadPrice: a price the manager would refuse at start is refused at install,
// naming the value.
func TestChartSchemaRefusesABadPrice(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`prices: {openai: {gpt-4o: {input: "2.5"}}}`, "/prices/openai/gpt-4o"},
		{`prices: {openai: {gpt-4o: {input: "abc", output: 10}}}`, "/prices/openai/gpt-4o/input"},
		{`prices: {openai: {gpt-4o: {input: "0.0000001", output: 10}}}`, "/prices/openai/gpt-4o/input"},
		{`prices: {openai: {gpt-4o: {input: -1, output: 10}}}`, "/prices/openai/gpt-4o/input"},
		{`prices: {openai: {gpt-4o: {input: 1, output: 10, inptu: 1}}}`, "inptu"},
		// The validator names a bad key by the key, not by where it is.
		{`prices: {OpenAI: {gpt-4o: {input: 1, output: 10}}}`, "'OpenAI' does not match pattern"},
		{`prices: {openai: {gpt-4o: 3}}`, "/prices/openai/gpt-4o"},
	} {
		file := filepath.Join(t.TempDir(), "v.yaml")
		if err := os.WriteFile(file, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := helm(t, "template", release, chartDir(), "-f", filepath.Join(chartDir(), "ci", "default-values.yaml"), "-f", file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a schema error saying %q", tc.doc, err, tc.want)
		}
	}
}
