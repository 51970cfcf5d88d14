// SPDX-License-Identifier: Apache-2.0

// Package kubetest runs a real Kubernetes API server for tests: Debian's
// etcd (package etcd-server) and a kube-apiserver binary built from the Go
// module proxy by tools/kube-apiserver/build.sh (make kube-apiserver), with
// no kubelet, scheduler or controller manager. Objects created through it
// are stored and served as in any cluster, but nothing acts on them: a Pod
// bound to a Node with spec.nodeName stays Pending, a DaemonSet creates no
// Pods, no namespace gets its "default" ServiceAccount.
//
// Start starts one cluster per test (about 5-10 s) on free loopback ports
// with a fresh CA, serving certificate and service-account signing key, and
// stops it when the test ends. Apply creates or updates objects from YAML or
// JSON documents (server-side apply), CRDs first and waited for.
package kubetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testbin"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Env names the environment variables that locate the binaries.
const (
	// EnvAPIServer is a kube-apiserver binary to use instead of the newest
	// .cache/kube-apiserver/<version>/kube-apiserver of the module root.
	EnvAPIServer = "KE_KUBE_APISERVER"
	// EnvEtcd is an etcd binary to use instead of etcd from PATH.
	EnvEtcd = "KE_ETCD"
)

// ServiceClusterIPRange is the cluster's Service IP range.
const ServiceClusterIPRange = "10.96.0.0/16"

// startTimeout bounds how long Start waits for etcd and then for the API
// server's /readyz.
const startTimeout = 90 * time.Second

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Config authenticates as an administrator (group system:masters) with
	// a bearer token over TLS verified against the cluster's CA.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file with the same server, CA and
	// credentials, for a program under test.
	Kubeconfig string
	// Host is the API server's URL, https://127.0.0.1:<port>.
	Host string
	// CAFile is the PEM file of the CA that signed the serving certificate.
	CAFile string
	// Dir holds the certificates, keys, etcd data and the logs etcd.log and
	// kube-apiserver.log.
	Dir string
	// StartupTime is how long Start took from launching etcd to a ready
	// API server.
	StartupTime time.Duration

	caPEM []byte
}

// Start runs etcd and kube-apiserver for the test t and returns the
// cluster once /readyz answers ok. Both processes are stopped (SIGTERM,
// then SIGKILL after 10 s) and waited for when t ends; when t failed, the
// tails of their logs are printed. A missing binary ends t with
// testenv.SkipOrFail (a failure under CI=true); a server that does not come
// up fails t.
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiserver, err := findAPIServer()
	if err != nil {
		testenv.SkipOrFail(t, "kubetest: %v (build it with make kube-apiserver)", err)
		return nil
	}
	etcd, err := findEtcd()
	if err != nil {
		testenv.SkipOrFail(t, "kubetest: %v (Debian package etcd-server)", err)
		return nil
	}

	dir := t.TempDir()
	c, procs, err := start(dir, apiserver, etcd)
	t.Cleanup(func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(10 * time.Second)
		}
		if t.Failed() {
			for _, p := range procs {
				t.Log("\n" + p.Tail(40))
			}
		}
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("kubetest: %s ready in %v (logs in %s)", c.Host, c.StartupTime.Round(time.Millisecond), dir)
	return c
}

// start launches etcd then kube-apiserver and waits for both. procs holds
// what was started, also on error, for the caller to stop.
func start(dir, apiserver, etcd string) (c *Cluster, procs []*testbin.Proc, err error) {
	began := time.Now()
	p, err := newPKI(dir)
	if err != nil {
		return nil, nil, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, nil, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+`,kubetest-admin,kubetest-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, nil, err
	}
	ports, err := testbin.FreePorts(3)
	if err != nil {
		return nil, nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	host := "https://127.0.0.1:" + strconv.Itoa(ports[2])

	e, err := testbin.StartProc("etcd", filepath.Join(dir, "etcd.log"), etcd,
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--log-level=warn",
		// etcd 3.4 < 3.4.31 does not answer the API server's progress
		// requests, so its watch cache advances only on events and on
		// etcd's periodic progress notifications (10 min by default):
		// a watch on pods would time out with "Too large resource
		// version" until a pod changes.
		"--experimental-watch-progress-notify-interval=500ms",
	)
	if err != nil {
		return nil, nil, err
	}
	procs = append(procs, e)
	deadline := time.Now().Add(startTimeout)
	if err := waitHTTP(e, http.DefaultClient, etcdURL+"/health", "", deadline); err != nil {
		return nil, procs, err
	}

	a, err := testbin.StartProc("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), apiserver,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The lease reconciler refuses a loopback advertise address
		// for the kubernetes Service's endpoints: keep none.
		"--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+dir,
		"--tls-cert-file="+p.serverCert,
		"--tls-private-key-file="+p.serverKey,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-signing-key-file="+p.saKey,
		"--service-account-key-file="+p.saKey,
		"--service-cluster-ip-range="+ServiceClusterIPRange,
		// No controller manager creates namespaces' "default"
		// ServiceAccount, which the ServiceAccount admission plugin
		// would require of every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return nil, procs, err
	}
	procs = append(procs, a)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer client.CloseIdleConnections()
	if err := waitHTTP(a, client, host+"/readyz", token, deadline); err != nil {
		return nil, procs, err
	}

	c = &Cluster{
		Config: &rest.Config{
			Host:            host,
			BearerToken:     token,
			TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
			QPS:             200,
			Burst:           400,
		},
		Host:   host,
		CAFile: p.caFile,
		Dir:    dir,
		caPEM:  p.caPEM,
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, host, p.caPEM, token); err != nil {
		return nil, procs, err
	}
	c.StartupTime = time.Since(began)
	return c, procs, nil
}

// waitHTTP polls url until it answers 200, p exits or deadline passes.
func waitHTTP(p *testbin.Proc, client *http.Client, url, token string, deadline time.Time) error {
	var last string
	for {
		if ok, err := p.Exited(); ok {
			return fmt.Errorf("kubetest: %s exited before it was ready: %v\n%s", p.Name, err, p.Tail(30))
		}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubetest: %s not ready at %s after %v: %s\n%s", p.Name, url, startTimeout, last, p.Tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeKubeconfig writes a kubeconfig for host, verified against caPEM,
// authenticating with the bearer token.
func writeKubeconfig(path, host string, caPEM []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest"}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubetest: kubeconfig %s: %w", path, err)
	}
	return nil
}

// findEtcd returns $KE_ETCD or etcd from PATH.
func findEtcd() (string, error) {
	if p := os.Getenv(EnvEtcd); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvEtcd, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("no etcd in PATH")
	}
	return p, nil
}

// findAPIServer returns $KE_KUBE_APISERVER, or the kube-apiserver of the
// highest version under <module root>/.cache/kube-apiserver/.
func findAPIServer() (string, error) {
	return testbin.Find(EnvAPIServer, "kube-apiserver", "kube-apiserver")
}

// ServiceAccountConfig returns a client config and a kubeconfig file that
// authenticate as the ServiceAccount namespace/name, with a token from the
// TokenRequest API valid for an hour: what a Pod of that ServiceAccount
// would use, so a test sees exactly what its RBAC grants. The
// ServiceAccount must exist. The kubeconfig is written to c.Dir.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, string, error) {
	token, err := requestToken(ctx, c.Config, namespace, name)
	if err != nil {
		return nil, "", err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = token
	path := filepath.Join(c.Dir, "sa-"+namespace+"-"+name+".kubeconfig")
	if err := writeKubeconfig(path, c.Host, c.caPEM, token); err != nil {
		return nil, "", err
	}
	return cfg, path, nil
}
