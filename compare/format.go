// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

// Output formats.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Write writes res's first top rows (every row when top is 0) as a table
// or as JSON (the Result, indented).
func Write(w io.Writer, res *Result, format string, top int) error {
	out := *res
	if top > 0 && len(out.Rows) > top {
		out.Rows = out.Rows[:top]
	}
	if format == FormatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&out)
	}
	fmt.Fprintf(w, "base: %s, %s, %d hosts\nnew:  %s, %s, %d hosts\n%d series, %d signals ranked by |Cliff's delta| x |log2 factor|\n\n",
		res.Base.Selector, window(res.Base.Start, res.Base.End), res.Base.Hosts,
		res.New.Selector, window(res.New.Start, res.New.End), res.New.Hosts, res.Series, len(res.Rows))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSIGNAL\tVALUE\tFACTOR\tAGREE\tBASE\tNEW\tDELTA\tKS\tPROMQL")
	for i, r := range out.Rows {
		value := "rate/s"
		switch r.Kind {
		case KindHistogram:
			value = "p" + strconv.FormatFloat(r.Quantile*100, 'f', -1, 64)
		case KindEvents:
			value = "events/s"
		}
		ks := "-"
		if r.KS != nil && !math.IsNaN(float64(*r.KS)) {
			ks = fmt.Sprintf("%.2f", float64(*r.KS))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%+.2f\t%s\t%s\n", i+1, r.Signal, value, factorString(float64(r.Factor)),
			r.Agree, r.NewHosts, num(r.Base), num(r.New), r.Delta, ks, r.PromQL)
	}
	return tw.Flush()
}

func window(a, b time.Time) string {
	return a.UTC().Format(time.RFC3339) + " to " + b.UTC().Format(time.RFC3339)
}

func factorString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "new"
	case f >= 100:
		return fmt.Sprintf("x%.0f", f)
	}
	return fmt.Sprintf("x%.3g", f)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
