// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestCheckDaemonSet serves a DaemonSet and its pods as an API server does
// and checks what CheckDaemonSet reads: the status' counts, the pods by
// the selector's labels, a pod not ready named with its node and reason
// (escaped), then the same DaemonSet with every pod ready; and an API
// error with its status and message.
func TestCheckDaemonSet(t *testing.T) {
	ds := `{"metadata":{"uid":"u1","generation":3},"spec":{"selector":{"matchLabels":{"app.kubernetes.io/name":"kernel-exporter","app.kubernetes.io/instance":"ke"}}},
"status":{"observedGeneration":3,"desiredNumberScheduled":2,"updatedNumberScheduled":2,"numberReady":%READY%}}`
	owner := `"ownerReferences":[{"kind":"DaemonSet","uid":"u1","controller":true}]`
	ready := `{"metadata":{"name":"ke-a",` + owner + `},"spec":{"nodeName":"node-a"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`
	notReady := `{"metadata":{"name":"ke-b",` + owner + `},"spec":{"nodeName":"node-b"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False","reason":"ContainersNotReady","message":"containers with unready status: [kernel-exporter]\u001b[2J"}]}}`
	readyB := strings.Replace(strings.Replace(ready, "ke-a", "ke-b", 1), "node-a", "node-b", 1)
	var pods, nready string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/apis/apps/v1/namespaces/monitoring/daemonsets/ke":
			w.Write([]byte(strings.Replace(ds, "%READY%", nready, 1)))
		case "/api/v1/namespaces/monitoring/pods":
			if got := r.URL.Query().Get("labelSelector"); got != "app.kubernetes.io/instance=ke,app.kubernetes.io/name=kernel-exporter" {
				t.Errorf("labelSelector %q", got)
			}
			w.Write([]byte(`{"items":[` + pods + `]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","message":"daemonsets.apps \"x\" not found","reason":"NotFound","code":404}`))
		}
	}))
	defer srv.Close()
	cfg := &Config{Host: srv.URL, BearerToken: "tok"}

	// A pod with the labels but not the DaemonSet's (helm test's) is not
	// counted.
	other := `{"metadata":{"name":"ke-test"},"spec":{"nodeName":"node-c"},"status":{"phase":"Pending"}}`
	pods, nready = ready+","+notReady+","+other, "1"
	r, err := CheckDaemonSet(context.Background(), cfg, "monitoring", "ke")
	if err != nil {
		t.Fatal(err)
	}
	want := `1 of 2 nodes ready, 2 up to date; ke-b on node-b: not ready: ContainersNotReady containers with unready status: [kernel-exporter]\x1b[2J`
	if r.Done() || r.String() != want || !slices.Equal(r.ReadyNodes, []string{"node-a"}) {
		t.Errorf("partial rollout: done %v, %q, ready nodes %v; want not done, %q, [node-a]", r.Done(), r, r.ReadyNodes, want)
	}
	pods, nready = ready+","+readyB, "2"
	if r, err = CheckDaemonSet(context.Background(), cfg, "monitoring", "ke"); err != nil || !r.Done() || !slices.Equal(r.ReadyNodes, []string{"node-a", "node-b"}) {
		t.Errorf("full rollout: %v, %v, ready nodes %v; want done on node-a and node-b", r, err, r.ReadyNodes)
	}
	if _, err := CheckDaemonSet(context.Background(), cfg, "monitoring", "x"); err == nil || !strings.Contains(err.Error(), `HTTP 404 Not Found: daemonsets.apps "x" not found`) {
		t.Errorf("missing DaemonSet: %v", err)
	}
	if (Rollout{Desired: 0, Current: true}).Done() {
		t.Error("a DaemonSet on no node is done")
	}
}
