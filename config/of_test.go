// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// kubeCounter decodes one cgroup id field into four labels.
const kubeCounter = `metrics:
  counters:
    - name: oom_kills_total
      help: OOM kills
      labels:
        - name: cgroup
          size: 8
          decoders:
            - name: cgroup
        - name: namespace
          of: cgroup
          decoders:
            - name: kube_namespace
        - name: pod
          of: cgroup
          decoders:
            - name: kube_pod
`

func TestLabelOf(t *testing.T) {
	c, err := Parse("kube.yaml", []byte(kubeCounter))
	if err != nil {
		t.Fatal(err)
	}
	labels := c.Metrics.Counters[0].Labels
	if KeySize(labels) != 8 || labels[2].Of != "cgroup" {
		t.Errorf("KeySize = %d, labels[2].of = %q; want 8 and cgroup", KeySize(labels), labels[2].Of)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown", "of: cgroup\n          decoders:\n            - name: kube_pod", "of: cgroupz\n          decoders:\n            - name: kube_pod",
			`metrics.counters[0].labels[2].of: no earlier label "cgroupz"`},
		{"later", "of: cgroup\n          decoders:\n            - name: kube_namespace", "of: pod\n          decoders:\n            - name: kube_namespace",
			`metrics.counters[0].labels[1].of: no earlier label "pod"`},
		{"chained", "of: cgroup\n          decoders:\n            - name: kube_pod", "of: namespace\n          decoders:\n            - name: kube_pod",
			`metrics.counters[0].labels[2].of: label "namespace" decodes the bytes of another label itself: name that one`},
		{"size", "          of: cgroup\n          decoders:\n            - name: kube_pod", "          of: cgroup\n          size: 8\n          decoders:\n            - name: kube_pod",
			`metrics.counters[0].labels[2].size: a label with of takes no bytes of the key: omit size (got 8)`},
		{"padding", "          of: cgroup\n          decoders:\n            - name: kube_pod", "          of: cgroup\n          padding: 8\n          decoders:\n            - name: kube_pod",
			`metrics.counters[0].labels[2].padding: a label with of takes no bytes of the key: omit padding (got 8)`},
	} {
		y := strings.Replace(kubeCounter, tc.from, tc.to, 1)
		if y == kubeCounter {
			t.Fatalf("%s: replacement did not apply", tc.name)
		}
		_, err := Parse("kube.yaml", []byte(y))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s", tc.name, err, tc.want)
		}
	}
}
