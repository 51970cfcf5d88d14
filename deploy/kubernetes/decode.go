// SPDX-License-Identifier: Apache-2.0

package kubernetes

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// newTyped returns a new value of the Go type of apiVersion and kind, for
// every kind the chart renders.
func newTyped(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}, true
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}, true
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, true
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "v1 Pod":
		return &corev1.Pod{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1 PodMonitor":
		return &monitoringv1.PodMonitor{}, true
	}
	return nil, false
}

// Decode returns o as a pointer to its Go type: *corev1.ServiceAccount,
// *corev1.ConfigMap, *corev1.Secret, *corev1.Service, *appsv1.DaemonSet,
// *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role,
// *rbacv1.RoleBinding, *corev1.Pod (helm test's), *networkingv1.NetworkPolicy
// (k8s.io/api), or *monitoringv1.ServiceMonitor, *monitoringv1.PodMonitor,
// *monitoringv1.PrometheusRule (prometheus-operator). Decoding is strict: a field the type lacks, a key
// given twice or a value of the wrong type is an error naming the object
// and its template, as is a kind the chart does not render.
func Decode(o Object) (any, error) {
	v, ok := newTyped(o.APIVersion, o.Kind)
	if !ok {
		return nil, fmt.Errorf("%s: %s %s: no Go type for apiVersion %s", o.Template, o.Kind, o.Name, o.APIVersion)
	}
	if err := yaml.UnmarshalStrict(o.YAML, v); err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", o.Template, o.Kind, o.Name, err)
	}
	return v, nil
}
