// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// The Resolver reads the API server's JSON over HTTP itself: a list and a
// watch of one resource with a field selector need a few dozen lines, and
// client-go's clientset, informers and scheme more than doubled the
// binary (31 against 22.7 MB) and the resident memory its pages take.

// Pod is what a Resolver reads of a core/v1 Pod (the API's JSON names).
type Pod struct {
	Metadata struct {
		UID             string            `json:"uid"`
		Namespace       string            `json:"namespace"`
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		ContainerStatuses          []ContainerStatus `json:"containerStatuses"`
		InitContainerStatuses      []ContainerStatus `json:"initContainerStatuses"`
		EphemeralContainerStatuses []ContainerStatus `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

// ContainerStatus is a container's entry of a pod's status.
type ContainerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
	LastState   struct {
		Terminated *struct {
			ContainerID string `json:"containerID"`
		} `json:"terminated"`
	} `json:"lastState"`
}

// mirrorPodAnnotation holds the hash of a static pod's manifest on its
// mirror pod (the kubelet's kubetypes.ConfigMirrorAnnotationKey).
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Event is one change of a watch.
type Event struct {
	Type string // "ADDED", "MODIFIED", "DELETED" or "BOOKMARK"
	Pod  *Pod   // for a bookmark, only its resourceVersion is set
}

// Source lists and watches the pods of one node: the API server's
// (NewSource), or a fake one in tests.
type Source interface {
	// List returns the node's pods and the resource version to watch
	// from.
	List(ctx context.Context) ([]*Pod, string, error)
	// Watch calls fn with every change after resourceVersion until ctx
	// is done, the server ends the watch (nil), fn fails, or the watch
	// fails; ErrExpired says the version is too old to watch from: list
	// again.
	Watch(ctx context.Context, resourceVersion string, fn func(Event) error) error
}

// ErrExpired: the resource version of a watch is too old (HTTP 410 Gone).
var ErrExpired = errors.New("resource version expired")

// Bounds of what the API server sends: one page of a list, one event of
// a watch.
const (
	maxListBody = 64 << 20
	maxEvent    = 16 << 20
	listPage    = 500
)

// apiSource lists and watches the pods of node on an API server.
type apiSource struct {
	cfg    *Config
	node   string
	list   *http.Client // with a timeout
	watch  *http.Client // without: a watch lasts minutes, bounded by timeoutSeconds
	header http.Header  // fixed headers
}

// NewSource returns the Source of the pods of node on the API server of
// cfg. The error is that of reading its certificates.
func NewSource(cfg *Config, node string) (Source, error) {
	t, err := cfg.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       t,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2,
		IdleConnTimeout:       90 * time.Second,
	}
	h := http.Header{"Accept": {"application/json"}, "User-Agent": {"kernel_exporter"}}
	return &apiSource{cfg: cfg, node: node, header: h,
		list:  &http.Client{Transport: tr, Timeout: 2 * time.Minute},
		watch: &http.Client{Transport: tr}}, nil
}

// get sends a GET of /api/v1/pods with the node's field selector and the
// query q, and returns the response when its status is 200; otherwise an
// error with the status and the API server's message (ErrExpired for 410).
func (s *apiSource) get(ctx context.Context, c *http.Client, q url.Values) (*http.Response, error) {
	q.Set("fieldSelector", "spec.nodeName="+s.node)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Host+"/api/v1/pods?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = s.header.Clone()
	return do(c, s.cfg, req)
}

// do authenticates req as cfg says and sends it with c; it returns the
// response when its status is 200, otherwise an error with the status and
// the API server's message (ErrExpired for 410).
func do(c *http.Client, cfg *Config, req *http.Request) (*http.Response, error) {
	switch {
	case cfg.BearerTokenFile != "":
		tok, err := bounded.ReadFile(cfg.BearerTokenFile, "Kubernetes token", MaxKubeconfig)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(tok)))
	case cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	case cfg.Username != "":
		req.SetBasicAuth(cfg.Username, cfg.Password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var st status
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st)
	return nil, st.err(resp.StatusCode)
}

// status is a meta/v1 Status, the body of an error response and the
// object of a watch's ERROR event.
type status struct {
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Code    int    `json:"code"`
}

func (st status) err(code int) error {
	if code == http.StatusGone || st.Code == http.StatusGone {
		return ErrExpired
	}
	msg := st.Message
	if len(msg) > 512 {
		msg = msg[:512]
	}
	if msg == "" {
		msg = st.Reason
	}
	return fmt.Errorf("HTTP %d %s: %s", code, http.StatusText(code), msg)
}

// List lists the node's pods, a page of listPage at a time.
func (s *apiSource) List(ctx context.Context) ([]*Pod, string, error) {
	var pods []*Pod
	cont := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listPage)}}
		if cont != "" {
			q.Set("continue", cont)
		}
		resp, err := s.get(ctx, s.list, q)
		if err != nil {
			return nil, "", fmt.Errorf("list pods: %w", err)
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []*Pod `json:"items"`
		}
		err = decodeBounded(resp.Body, maxListBody, &page)
		resp.Body.Close()
		if err != nil {
			return nil, "", fmt.Errorf("list pods: %w", err)
		}
		pods = append(pods, page.Items...)
		if page.Metadata.Continue == "" {
			return pods, page.Metadata.ResourceVersion, nil
		}
		cont = page.Metadata.Continue
	}
}

// Watch watches the node's pods from resourceVersion, with bookmarks,
// for 5 to 10 minutes (the server then ends it, as client-go's reflector
// asks).
func (s *apiSource) Watch(ctx context.Context, resourceVersion string, fn func(Event) error) error {
	q := url.Values{
		"watch":               {"true"},
		"resourceVersion":     {resourceVersion},
		"allowWatchBookmarks": {"true"},
		"timeoutSeconds":      {strconv.Itoa(300 + rand.IntN(300))},
	}
	resp, err := s.get(ctx, s.watch, q)
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	defer resp.Body.Close()
	if err := readEvents(resp.Body, fn); err != nil {
		if errors.Is(err, ErrExpired) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("watch pods: %w", err)
	}
	return nil
}

// readEvents decodes a watch's stream of JSON events, each at most
// maxEvent bytes, and calls fn with each; it returns nil at the end of the
// stream, ErrExpired for an ERROR event with code 410.
func readEvents(r io.Reader, fn func(Event) error) error {
	lr := &eventLimit{r: r}
	dec := json.NewDecoder(lr)
	for {
		lr.n = 0
		var e struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch e.Type {
		case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
			p := &Pod{}
			if err := json.Unmarshal(e.Object, p); err != nil {
				return fmt.Errorf("%s event: %w", e.Type, err)
			}
			if err := fn(Event{Type: e.Type, Pod: p}); err != nil {
				return err
			}
		case "ERROR":
			var st status
			_ = json.Unmarshal(e.Object, &st)
			return st.err(st.Code)
		default:
			return fmt.Errorf("unknown watch event type %q", clipString(e.Type, 32))
		}
	}
}

// eventLimit fails a read once n, reset before each event, passes
// maxEvent.
type eventLimit struct {
	r io.Reader
	n int
}

func (l *eventLimit) Read(p []byte) (int, error) {
	if l.n >= maxEvent {
		return 0, fmt.Errorf("a watch event is larger than %s", bounded.Size(maxEvent))
	}
	if len(p) > maxEvent-l.n {
		p = p[:maxEvent-l.n]
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

// decodeBounded decodes one JSON value of at most max bytes from r.
func decodeBounded(r io.Reader, max int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("response larger than %s", bounded.Size(max))
	}
	return json.Unmarshal(data, v)
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
