// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/httpclient"
	ptext "github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// Defaults and limits of the inputs of profile diff.
const (
	// DefaultFetchTimeout is the time one URL may take, the profile's
	// ?seconds= included.
	DefaultFetchTimeout = 2 * time.Minute
	// DefaultMaxFetchBytes bounds a response body (a profile as pprof is
	// gzipped: a host's 30 s profile is some hundred KiB).
	DefaultMaxFetchBytes = 64 << 20
	// MaxInputs bounds the inputs of one side.
	MaxInputs = 256
)

// ErrTooLarge is returned (wrapped) for a response larger than
// InputOptions.MaxBytes.
var ErrTooLarge = errors.New("response too large")

// InputOptions say how ReadInputs reaches URLs.
type InputOptions struct {
	// Client: authentication and TLS (package httpclient).
	Client httpclient.Options
	// FlagPrefix names the client's flags in errors ("--http.").
	FlagPrefix string
	// Timeout bounds each URL, connection to last byte
	// (DefaultFetchTimeout when 0).
	Timeout time.Duration
	// MaxBytes bounds each response body (DefaultMaxFetchBytes when 0).
	MaxBytes int64
	// Kind of folded inputs (pprof says its own): CPU when "".
	Kind Kind
	// Transport, when set, carries the requests instead of the one built
	// from Client (tests).
	Transport http.RoundTripper
}

// IsURL reports whether input is an http:// or https:// URL (else a
// file).
func IsURL(input string) bool {
	return strings.HasPrefix(input, "http://") || strings.HasPrefix(input, "https://")
}

// ReadInputs reads profiles from inputs, files (ReadFile) and URLs (an
// exporter's /profile/cpu or /profile/offcpu with their query options, or
// any server of pprof), all at once, each URL within o.Timeout and
// o.MaxBytes, and merges them with every input weighted equally
// (MergeEqual). Errors name the input (a URL without its password) and
// never quote what it returned; the first failure is returned.
func ReadInputs(ctx context.Context, inputs []string, o InputOptions) (*Profile, error) {
	if len(inputs) == 0 || len(inputs) > MaxInputs {
		return nil, fmt.Errorf("%d inputs: want 1 to %d", len(inputs), MaxInputs)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxFetchBytes
	}
	if o.Kind == "" {
		o.Kind = CPU
	}
	var client *http.Client
	for _, in := range inputs {
		if !IsURL(in) {
			continue
		}
		if err := checkURL(in, o.Timeout); err != nil {
			return nil, err
		}
		if client == nil {
			rt := o.Transport
			if rt == nil {
				var err error
				if rt, err = httpclient.RoundTripper(o.Client, o.FlagPrefix, "kernel_exporter_profile_diff"); err != nil {
					return nil, err
				}
			}
			client = &http.Client{Transport: rt}
		}
	}
	profiles := make([]*Profile, len(inputs))
	errs := make([]error, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Go(func() {
			if IsURL(in) {
				profiles[i], errs[i] = fetch(ctx, client, in, o)
			} else {
				profiles[i], errs[i] = ReadFile(in, o.Kind)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return MergeEqual(profiles, inputs)
}

// checkURL checks that raw parses and that its ?seconds= (the profile's
// length) leaves time within timeout.
func checkURL(raw string, timeout time.Duration) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("URL %s: want http:// or https://host[:port]/path[?query]", ptext.Quote(raw, 256))
	}
	if s := u.Query().Get("seconds"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && time.Duration(n)*time.Second >= timeout {
			return fmt.Errorf("URL %s: seconds=%d takes at least the --timeout %v: make the timeout longer", redact(u), n, timeout)
		}
	}
	return nil
}

// redact is u printable, without its password.
func redact(u *url.URL) string { return ptext.Quote(u.Redacted(), 256) }

// fetch GETs a profile from raw within o's bounds.
func fetch(ctx context.Context, client *http.Client, raw string, o InputOptions) (*Profile, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("URL %s: %w", ptext.Quote(raw, 256), err)
	}
	name := redact(u)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("URL %s: %w", name, err)
	}
	timedOut := func(err error) error {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("URL %s: no complete answer within %v (--timeout)", name, o.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named already
		}
		return fmt.Errorf("URL %s: %s", name, ptext.Cut(err.Error(), 300))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, timedOut(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("URL %s: %s", name, ptext.Cut(resp.Status, 100))
	}
	if resp.ContentLength > o.MaxBytes {
		return nil, fmt.Errorf("URL %s: %w: %d bytes announced, more than %d (--max-bytes)", name, ErrTooLarge, resp.ContentLength, o.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, o.MaxBytes+1))
	if err != nil {
		return nil, timedOut(err)
	}
	if int64(len(data)) > o.MaxBytes {
		return nil, fmt.Errorf("URL %s: %w: more than %d bytes (--max-bytes)", name, ErrTooLarge, o.MaxBytes)
	}
	p, err := ParseLimit(data, o.Kind, MaxProfileFile)
	if err != nil {
		return nil, fmt.Errorf("URL %s: %w", name, err)
	}
	return p, nil
}

// MergeEqual merges profiles (named by names in errors) weighting each
// equally: each is scaled to the largest one's total before they are
// summed, so that every profile holds the same share of the result and a
// busy host does not outweigh an idle one. One profile is returned as it
// is. Errors: profiles of different kinds, or one without samples.
func MergeEqual(profiles []*Profile, names []string) (*Profile, error) {
	var top int64
	for i, p := range profiles {
		if p.Kind != profiles[0].Kind {
			return nil, fmt.Errorf("%s is a %s profile, %s a %s one: cannot merge them", ptext.Quote(names[i], 256), p.Kind, ptext.Quote(names[0], 256), profiles[0].Kind)
		}
		t := p.Total()
		if t <= 0 {
			return nil, fmt.Errorf("%s: %w", ptext.Quote(names[i], 256), ErrEmptyProfile)
		}
		top = max(top, t)
	}
	if len(profiles) == 1 {
		return profiles[0], nil
	}
	out := &Profile{Kind: profiles[0].Kind, Event: profiles[0].Event, Frequency: profiles[0].Frequency, Start: profiles[0].Start}
	for _, p := range profiles {
		scale := float64(top) / float64(p.Total())
		q := *p
		q.Samples = make([]Sample, len(p.Samples))
		for i, s := range p.Samples {
			s.Value = int64(math.Round(float64(s.Value) * scale))
			q.Samples[i] = s
		}
		out.Merge(&q)
		if q.Frequency != out.Frequency {
			out.Frequency = 0
		}
	}
	return out, nil
}
