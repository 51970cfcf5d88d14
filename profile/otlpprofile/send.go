// SPDX-License-Identifier: Apache-2.0

package otlpprofile

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

	"github.com/kernel-exporter/kernel_exporter/internal/otlpenv"
	"github.com/kernel-exporter/kernel_exporter/profile"
)

// Signal is the signal name in the OTEL_EXPORTER_OTLP_<signal>_* variables.
const Signal = "PROFILES"

// GRPCMethod is the OTLP/gRPC profiles export method.
const GRPCMethod = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

// HTTPPath is the path of the OTLP/HTTP profiles export, appended to
// OTEL_EXPORTER_OTLP_ENDPOINT (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT is used
// as it is).
const HTTPPath = "/v1development/profiles"

// Interval bounds: each interval is one profile session, then one export.
const (
	DefaultInterval = time.Minute
	MinInterval     = time.Second
	MaxInterval     = profile.MaxDuration
)

// maxResponse bounds the export response read.
const maxResponse = 64 << 10

// Sender exports profiles to the endpoint of the OTEL_EXPORTER_OTLP_*
// variables, over OTLP/HTTP (protobuf) or OTLP/gRPC.
type Sender struct {
	desc    string
	http    *http.Client
	url     string
	conn    *grpc.ClientConn
	headers map[string]string
	version string
}

// NewSender reads the variables: OTEL_EXPORTER_OTLP_[PROFILES_]PROTOCOL
// (grpc or http/protobuf, the default), _ENDPOINT (default
// http://localhost:4318, or localhost:4317 for gRPC), _HEADERS
// (key=value,... URL-encoded) and _INSECURE (gRPC without TLS for an
// endpoint without a scheme). https endpoints use the system's roots; the
// _CERTIFICATE and _CLIENT_* variables are not read (an error says so).
// version is the resource's service.version.
func NewSender(version string) (*Sender, error) {
	proto, err := otlpenv.Protocol(Signal)
	if err != nil {
		return nil, err
	}
	for _, v := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_" + Signal + "_" + v, "OTEL_EXPORTER_OTLP_" + v} {
			if os.Getenv(n) != "" {
				return nil, fmt.Errorf("%s: custom certificates are not supported for OTLP profiles (system roots only)", n)
			}
		}
	}
	headers, err := parseHeaders()
	if err != nil {
		return nil, err
	}
	s := &Sender{headers: headers, version: version}
	name, endpoint := otlpenv.Endpoint(Signal)
	if proto == otlpenv.HTTPProtobuf {
		switch {
		case endpoint == "":
			endpoint, name = "http://localhost:4318"+HTTPPath, "default"
		case name == "OTEL_EXPORTER_OTLP_ENDPOINT":
			endpoint = strings.TrimSuffix(endpoint, "/") + HTTPPath
		}
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s=%q: want http:// or https:// and a host", name, cut(endpoint))
		}
		s.url = u.String()
		s.http = &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
		s.desc = fmt.Sprintf("OTLP http/protobuf to %s (%s)", s.url, name)
		return s, nil
	}
	if endpoint == "" {
		endpoint, name = "localhost:4317", "default"
	}
	target, secure := endpoint, os.Getenv("OTEL_EXPORTER_OTLP_"+Signal+"_INSECURE") != "true" && os.Getenv("OTEL_EXPORTER_OTLP_INSECURE") != "true"
	if u, err := url.Parse(endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		target, secure = u.Host, u.Scheme == "https"
	}
	creds := insecure.NewCredentials()
	if secure {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", name, cut(endpoint), err)
	}
	s.conn = conn
	s.desc = fmt.Sprintf("OTLP grpc to %s (%s)", target, name)
	return s, nil
}

// String describes where profiles go.
func (s *Sender) String() string { return s.desc }

// Close closes the gRPC connection.
func (s *Sender) Close() error {
	if s.conn != nil {
		return s.conn.Close()
	}
	return nil
}

// Send exports p; the error names the endpoint and the status, and
// counts a partial success's rejected profiles.
func (s *Sender) Send(ctx context.Context, p *profile.Profile) error {
	req := Encode(p, s.version)
	var resp []byte
	if s.conn != nil {
		if len(s.headers) > 0 {
			ctx = metadata.NewOutgoingContext(ctx, metadata.New(s.headers))
		}
		if err := s.conn.Invoke(ctx, GRPCMethod, req, &resp, grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(maxResponse)); err != nil {
			return fmt.Errorf("%s: %w", s.desc, err)
		}
	} else {
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(req))
		if err != nil {
			return err
		}
		hr.Header.Set("Content-Type", "application/x-protobuf")
		for k, v := range s.headers {
			hr.Header.Set(k, v)
		}
		hresp, err := s.http.Do(hr)
		if err != nil {
			return fmt.Errorf("%s: %w", s.desc, err)
		}
		defer hresp.Body.Close()
		resp, _ = io.ReadAll(io.LimitReader(hresp.Body, maxResponse))
		if hresp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: HTTP %s", s.desc, hresp.Status)
		}
	}
	if ps, err := parseResponse(resp); err == nil && ps.rejected > 0 {
		return fmt.Errorf("%s: %d profiles rejected: %s", s.desc, ps.rejected, cut(ps.message))
	}
	return nil
}

// rawCodec passes an encoded request ([]byte) and the response (into a
// *[]byte) through gRPC as they are; its name keeps gRPC's content-type
// application/grpc+proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("otlpprofile: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("otlpprofile: cannot unmarshal into %T", v)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// Run takes profiles of o.Duration back to back until ctx ends, and sends
// each; timeout bounds each send. Errors are logged, and sampling goes on.
func (s *Sender) Run(ctx context.Context, o profile.Options, timeout time.Duration, log *slog.Logger) {
	for ctx.Err() == nil {
		sess, err := profile.NewSession(o)
		if err == nil {
			var p *profile.Profile
			p, err = sess.Run(ctx)
			if err == nil && len(p.Samples) > 0 {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
				err = s.Send(sctx, p)
				cancel()
				if err == nil {
					log.Debug("otlp profiles: sent", "samples", p.Total(), "to", s.desc)
				}
			}
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("otlp profiles", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(o.Duration):
			}
		}
	}
}

// parseHeaders reads OTEL_EXPORTER_OTLP_[PROFILES_]HEADERS: key=value
// pairs separated by commas, URL-encoded.
func parseHeaders() (map[string]string, error) {
	for _, n := range []string{"OTEL_EXPORTER_OTLP_" + Signal + "_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"} {
		v := os.Getenv(n)
		if v == "" {
			continue
		}
		h := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k, err1 := url.PathUnescape(strings.TrimSpace(k))
			val, err2 := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: a pair is not key=value (URL-encoded)", n)
			}
			h[strings.ToLower(k)] = val
		}
		return h, nil
	}
	return nil, nil
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
