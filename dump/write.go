// SPDX-License-Identifier: Apache-2.0

package dump

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prom2json"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exposition"
)

// Write prints one exposition of src and g to w in format f: the
// snapshots of src are read first, then g is gathered (so that the scrape
// self-metrics describe these reads), as the HTTP handler does.
//
// Everything that could be read is written. The error joins, after the
// output: a family whose map read failed (naming config, metric and
// cause; the family is left out), a failed Gather (what was gathered is
// still written), and a failure to encode or to write w (the output is
// then cut short). An unknown format writes nothing and returns an error.
func Write(w io.Writer, f Format, src exposition.Source, g prometheus.Gatherer) error {
	if f != FormatText && f != FormatJSON {
		_, err := ParseFormat(string(f))
		return err
	}
	snaps := src.Read()
	var errs []error
	for _, s := range snaps {
		for _, fam := range s.Families {
			if fam.Err != nil {
				errs = append(errs, fmt.Errorf("config %s: metric %s left out: map read failed: %w", s.Config, fam.Name, fam.Err))
			}
		}
	}
	mfs, err := g.Gather()
	if err != nil {
		errs = append(errs, fmt.Errorf("gathering the exporter's self-metrics: %w", err))
	}
	if f == FormatText {
		err = exposition.Write(w, expfmt.NewFormat(expfmt.TypeTextPlain), mfs, snaps)
	} else {
		err = writeJSON(w, mfs, snaps)
	}
	return errors.Join(append(errs, err)...)
}

// writeJSON writes the families as prom2json does: the text exposition is
// parsed back into dto families (a lossless round trip for the classic
// histograms and values the text carries), each is converted by
// prom2json.NewFamily, and the array is encoded on one line, in the order
// of the text exposition.
func writeJSON(w io.Writer, mfs []*dto.MetricFamily, snaps []*collector.Snapshot) error {
	var text bytes.Buffer
	if err := exposition.Write(&text, expfmt.NewFormat(expfmt.TypeTextPlain), mfs, snaps); err != nil {
		return err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&text)
	if err != nil {
		return fmt.Errorf("dump: parsing the text exposition back: %w", err)
	}
	out := make([]*prom2json.Family, 0, len(parsed))
	for _, name := range familyOrder(mfs, snaps, parsed) {
		out = append(out, prom2json.NewFamily(parsed[name]))
	}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// familyOrder returns the names of parsed in the order exposition.Write
// writes them (gathered families, then each snapshot's families), then
// any other name of parsed, sorted.
func familyOrder(mfs []*dto.MetricFamily, snaps []*collector.Snapshot, parsed map[string]*dto.MetricFamily) []string {
	names := make([]string, 0, len(parsed))
	seen := make(map[string]bool, len(parsed))
	add := func(n string) {
		if _, ok := parsed[n]; ok && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, mf := range mfs {
		add(mf.GetName())
	}
	for _, s := range snaps {
		for _, fam := range s.Families {
			add(fam.Name)
		}
	}
	var rest []string
	for n := range parsed {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}
