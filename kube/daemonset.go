// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// Rollout is what CheckDaemonSet reads of an apps/v1 DaemonSet and its
// pods: whether a pod runs, up to date and ready, on every node the
// DaemonSet schedules to.
type Rollout struct {
	// Desired, Updated and Ready are the DaemonSet status' counts of
	// nodes that should run a pod, that run the current template's, and
	// whose pod is ready; Current reports whether the status is of the
	// current generation.
	Desired, Updated, Ready int
	Current                 bool
	// ReadyNodes are the nodes whose pod is ready, NotReady one line per
	// other pod ("<pod> on <node>: <why>"), both sorted.
	ReadyNodes []string
	NotReady   []string
}

// Done reports whether every node the DaemonSet schedules to runs a ready
// pod of its current template (at least one node).
func (r Rollout) Done() bool {
	return r.Current && r.Desired > 0 && r.Updated == r.Desired && r.Ready == r.Desired &&
		len(r.ReadyNodes) == r.Desired && len(r.NotReady) == 0
}

// String says how far the rollout is, naming the pods not ready.
func (r Rollout) String() string {
	s := fmt.Sprintf("%d of %d nodes ready, %d up to date", r.Ready, r.Desired, r.Updated)
	if !r.Current {
		s += ", status not yet of the current generation"
	}
	if len(r.NotReady) > 0 {
		s += "; " + strings.Join(r.NotReady, "; ")
	}
	return s
}

// daemonSet is what CheckDaemonSet reads of an apps/v1 DaemonSet.
type daemonSet struct {
	Metadata struct {
		UID        string `json:"uid"`
		Generation int64  `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration     int64 `json:"observedGeneration"`
		DesiredNumberScheduled int   `json:"desiredNumberScheduled"`
		UpdatedNumberScheduled int   `json:"updatedNumberScheduled"`
		NumberReady            int   `json:"numberReady"`
	} `json:"status"`
}

// podList is what CheckDaemonSet reads of the DaemonSet's pods.
type podList struct {
	Items []struct {
		Metadata struct {
			Name              string  `json:"name"`
			DeletionTimestamp *string `json:"deletionTimestamp"`
			OwnerReferences   []struct {
				Kind       string `json:"kind"`
				UID        string `json:"uid"`
				Controller bool   `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			Phase      string `json:"phase"`
			Conditions []struct {
				Type    string `json:"type"`
				Status  string `json:"status"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// CheckDaemonSet reads the DaemonSet name in namespace and its pods (those
// of its selector's matchLabels that it controls: ownerReferences) from
// the API server of cfg, which needs
// get on daemonsets and list on pods there. Each answer is bounded
// (64 MiB) and the whole call by ctx and a one-minute client timeout.
// Errors: the API server's (with its status and message), or a DaemonSet
// without matchLabels.
func CheckDaemonSet(ctx context.Context, cfg *Config, namespace, name string) (Rollout, error) {
	var r Rollout
	t, err := cfg.tlsConfig()
	if err != nil {
		return r, fmt.Errorf("kubernetes client: %w", err)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: t, TLSHandshakeTimeout: 10 * time.Second}}
	defer c.CloseIdleConnections()
	get := func(path string, q url.Values, v any) error {
		u := cfg.Host + path
		if q != nil {
			u += "?" + q.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "kernel_exporter")
		resp, err := do(c, cfg, req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		defer resp.Body.Close()
		if err := decodeBounded(resp.Body, maxListBody, v); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		return nil
	}
	var ds daemonSet
	if err := get("/apis/apps/v1/namespaces/"+url.PathEscape(namespace)+"/daemonsets/"+url.PathEscape(name), nil, &ds); err != nil {
		return r, err
	}
	st := ds.Status
	r.Desired, r.Updated, r.Ready = st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady
	r.Current = st.ObservedGeneration >= ds.Metadata.Generation
	if len(ds.Spec.Selector.MatchLabels) == 0 {
		return r, fmt.Errorf("daemonset %s/%s selects its pods by no matchLabels", namespace, name)
	}
	var sel []string
	for k, v := range ds.Spec.Selector.MatchLabels {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	var pods podList
	if err := get("/api/v1/namespaces/"+url.PathEscape(namespace)+"/pods", url.Values{"labelSelector": {strings.Join(sel, ",")}}, &pods); err != nil {
		return r, err
	}
	for _, p := range pods.Items {
		// Only the DaemonSet's own pods: others may carry its labels.
		owned := false
		for _, o := range p.Metadata.OwnerReferences {
			owned = owned || o.Controller && o.Kind == "DaemonSet" && o.UID == ds.Metadata.UID
		}
		if !owned {
			continue
		}
		node := p.Spec.NodeName
		if node == "" {
			node = "(no node)"
		}
		why := ""
		switch {
		case p.Metadata.DeletionTimestamp != nil:
			why = "terminating"
		default:
			why = "phase " + p.Status.Phase + ", no Ready condition"
			for _, c := range p.Status.Conditions {
				if c.Type != "Ready" {
					continue
				}
				why = ""
				if c.Status != "True" {
					why = printable.Cut(strings.TrimSpace("not ready: "+c.Reason+" "+c.Message), 300)
				}
			}
		}
		if why == "" {
			r.ReadyNodes = append(r.ReadyNodes, printable.Cut(node, 253))
			continue
		}
		r.NotReady = append(r.NotReady, printable.Cut(p.Metadata.Name, 253)+" on "+printable.Cut(node, 253)+": "+why)
	}
	slices.Sort(r.ReadyNodes)
	slices.Sort(r.NotReady)
	return r, nil
}
