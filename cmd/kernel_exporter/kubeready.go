// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/kube"
)

// Bounds of kube-ready's flags.
const (
	maxKubeReadyTimeout = time.Hour
	kubeReadyInterval   = 2 * time.Second
)

// kubeReadyCommand declares kube-ready: the Helm chart's test, which waits
// until the exporter's DaemonSet runs a ready pod of its current template
// on every node it schedules to.
func kubeReadyCommand(app *kingpin.Application) *command {
	c := app.Command("kube-ready", "Wait until a DaemonSet runs a ready pod of its current template on every node it schedules to (the Helm chart's test: helm test), reading it and its pods from the Kubernetes API every 2 s. Exit 0 when so, printing the nodes; 1 at --timeout or on an API error, naming the pods not ready; 2 for bad flags.")
	ns := c.Flag("kube.namespace", "Namespace of the DaemonSet.").Required().String()
	name := c.Flag("kube.daemonset", "Name of the DaemonSet.").Required().String()
	kubeconfig := c.Flag("kube.kubeconfig", "Kubeconfig file of the Kubernetes API. Default: the in-cluster service account.").String()
	timeout := c.Flag("timeout", "How long to wait, at most 1h.").Default("2m").Duration()
	cmd := &command{clause: c}
	cmd.check = func() error {
		if *timeout <= 0 || *timeout > maxKubeReadyTimeout {
			return fmt.Errorf("--timeout %v: must be more than 0 and at most %v", *timeout, maxKubeReadyTimeout)
		}
		if *name == "" || len(*name) > maxNodeName || !nodeName.MatchString(*name) {
			return fmt.Errorf("--kube.daemonset %s: not a Kubernetes object name", quote(*name))
		}
		if len(*ns) > 63 || !nodeName.MatchString(*ns) {
			return fmt.Errorf("--kube.namespace %s: not a Kubernetes namespace name", quote(*ns))
		}
		return checkFile("--kube.kubeconfig", *kubeconfig)
	}
	cmd.run = func(e *env) int {
		cfg, err := kube.RESTConfig(*kubeconfig)
		if err == nil && cfg == nil {
			err = errors.New("no Kubernetes API: give --kube.kubeconfig, or run in a pod")
		}
		namespace := *ns
		if err != nil {
			fmt.Fprintf(e.stderr, "kube-ready: %v\n", err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		var last kube.Rollout
		var lastErr error
		for {
			r, err := kube.CheckDaemonSet(ctx, cfg, namespace, *name)
			if err == nil && r.Done() {
				fmt.Fprintf(e.stdout, "daemonset %s/%s: %s: %v\n", namespace, *name, r, r.ReadyNodes)
				return 0
			}
			if err == nil {
				last, lastErr = r, nil
			} else if ctx.Err() == nil {
				lastErr = err
			}
			select {
			case <-ctx.Done():
				if lastErr != nil {
					fmt.Fprintf(e.stderr, "kube-ready: daemonset %s/%s: %v\n", namespace, *name, lastErr)
				} else {
					fmt.Fprintf(e.stderr, "kube-ready: daemonset %s/%s not ready after %v: %s\n", namespace, *name, *timeout, last)
				}
				return 1
			case <-time.After(kubeReadyInterval):
			}
		}
	}
	return cmd
}
