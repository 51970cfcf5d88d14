// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSourceHTTP runs the API client against a test server: a list in
// two pages, a watch with every event type, a token file read at every
// request, an error with the server's message, 410 Gone.
func TestSourceHTTP(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var tokens []string
	var forbid, gone atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/pods" || q.Get("fieldSelector") != "spec.nodeName=node-a" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		switch {
		case forbid.Load():
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","message":"pods is forbidden: User \"x\" cannot list resource \"pods\"","reason":"Forbidden","code":403}`)
		case gone.Load() && q.Get("watch") == "true":
			fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}`)
		case q.Get("watch") == "true":
			if q.Get("resourceVersion") != "7" || q.Get("allowWatchBookmarks") != "true" {
				http.Error(w, "bad watch "+r.URL.String(), http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"type":"ADDED","object":{"metadata":{"uid":"u3","name":"c","namespace":"n","resourceVersion":"8"}}}
{"type":"MODIFIED","object":{"metadata":{"uid":"u3","name":"c","namespace":"n","resourceVersion":"9"},"status":{"containerStatuses":[{"name":"x","containerID":"containerd://abc","lastState":{"terminated":{"containerID":"containerd://old"}}}]}}}
{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"10"}}}
{"type":"DELETED","object":{"metadata":{"uid":"u3","resourceVersion":"11"}}}
`)
		case q.Get("continue") == "":
			fmt.Fprint(w, `{"kind":"PodList","metadata":{"resourceVersion":"6","continue":"next"},"items":[{"metadata":{"uid":"u1","name":"a","namespace":"n"},"spec":{"nodeName":"node-a"}}]}`)
		default:
			fmt.Fprint(w, `{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"uid":"u2","name":"b","namespace":"n","annotations":{"kubernetes.io/config.mirror":"h"}}}]}`)
		}
	}))
	defer srv.Close()
	src, err := NewSource(&Config{Host: srv.URL, BearerTokenFile: tokenFile}, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods, rv, err := src.List(ctx)
	if err != nil || rv != "7" || len(pods) != 2 || pods[0].Metadata.UID != "u1" || pods[1].Metadata.Annotations[mirrorPodAnnotation] != "h" {
		t.Fatalf("List = %d pods, version %q, %v; want u1 and u2 (with its annotation) at version 7", len(pods), rv, err)
	}
	if err := os.WriteFile(tokenFile, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = src.Watch(ctx, rv, func(e Event) error {
		s := e.Type + ":" + e.Pod.Metadata.UID + "@" + e.Pod.Metadata.ResourceVersion
		if cs := e.Pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].LastState.Terminated != nil {
			s += "+" + cs[0].ContainerID + "," + cs[0].LastState.Terminated.ContainerID
		}
		got = append(got, s)
		return nil
	})
	want := "ADDED:u3@8 MODIFIED:u3@9+containerd://abc,containerd://old BOOKMARK:@10 DELETED:u3@11"
	if err != nil || strings.Join(got, " ") != want {
		t.Errorf("Watch = %q, %v; want %q", strings.Join(got, " "), err, want)
	}
	mu.Lock()
	if strings.Join(tokens, ",") != "Bearer one,Bearer one,Bearer two" {
		t.Errorf("Authorization headers %q: want the token file read at each request", tokens)
	}
	mu.Unlock()
	gone.Store(true)
	if err := src.Watch(ctx, rv, func(Event) error { return nil }); !errors.Is(err, ErrExpired) {
		t.Errorf("Watch of an expired version: %v, want ErrExpired", err)
	}
	forbid.Store(true)
	if _, _, err := src.List(ctx); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "pods is forbidden") {
		t.Errorf("List when forbidden: %v, want the status and the server's message", err)
	}
}

// TestReadEventsBounds refuses an event larger than maxEvent and an
// unknown event type.
func TestReadEventsBounds(t *testing.T) {
	big := `{"type":"ADDED","object":{"metadata":{"name":"` + strings.Repeat("x", maxEvent) + `"}}}`
	if err := readEvents(strings.NewReader(big), func(Event) error { return nil }); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a %d-byte event: %v, want an error", len(big), err)
	}
	if err := readEvents(strings.NewReader(`{"type":"SURPRISE","object":{}}`), func(Event) error { return nil }); err == nil {
		t.Error("an unknown event type was accepted")
	}
}

// FuzzWatchEvents feeds a watch stream to readEvents: it must never
// panic, and every event it hands on has a pod.
func FuzzWatchEvents(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"uid":"u","resourceVersion":"1"},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://x"}]}}}` + "\n" + `{"type":"ERROR","object":{"code":410}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readEvents(strings.NewReader(string(data)), func(e Event) error {
			if e.Pod == nil {
				t.Fatal("event without a pod")
			}
			newPodMeta(e.Pod)
			return nil
		})
	})
}

// FuzzKubeconfig parses kubeconfig files: no panic, and a config has an
// http(s) server.
func FuzzKubeconfig(f *testing.F) {
	f.Add([]byte("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://h:6443', certificate-authority-data: Zm9v}\nusers:\n- name: u\n  user: {token: secret-token-value}\n"))
	f.Add([]byte("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'http://h'}\nusers:\n- name: u\n  user: {exec: {command: secret-token-value}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseKubeconfig(data, "/etc")
		if err == nil && !strings.HasPrefix(cfg.Host, "http") {
			t.Fatalf("server %q accepted", cfg.Host)
		}
	})
}
