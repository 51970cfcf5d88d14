// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("regexp", newRegexp) }

// Bounds of a regexp decoder's settings: the config's, also enforced here
// for decoders built in code.
const (
	MaxRegexps   = config.MaxRegexps
	MaxRegexpLen = config.MaxRegexpLen
)

// regexpFilter keeps the keys whose label text matches at least one of
// conf.Regexps and drops the others: its Decode returns the input unchanged
// or ErrSkip. Patterns use Go's RE2 syntax and are not anchored (like grep):
// "^tcp_" matches names that start with tcp_, "tcp" any name containing it.
// The patterns are compiled into one alternation, so that many patterns cost
// one program and one match.
type regexpFilter struct{ re *regexp.Regexp }

// newRegexp fails for no patterns, more than MaxRegexps, one longer than
// MaxRegexpLen, or one that does not compile; errors quote at most 24 bytes
// of a pattern.
func newRegexp(e *Env, conf config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	if len(conf.Regexps) == 0 {
		return nil, fmt.Errorf("regexp: no patterns (set regexps)")
	}
	if len(conf.Regexps) > MaxRegexps {
		return nil, fmt.Errorf("regexp: %d patterns, more than the limit of %d", len(conf.Regexps), MaxRegexps)
	}
	subs := make([]*syntax.Regexp, len(conf.Regexps))
	for i, p := range conf.Regexps {
		if len(p) > MaxRegexpLen {
			return nil, fmt.Errorf("regexp: pattern %d is %d bytes long, more than the limit of %d", i, len(p), MaxRegexpLen)
		}
		sub, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("regexp: bad pattern %s: %s", config.Quote(p), syntaxReason(err))
		}
		subs[i] = sub
	}
	if e != nil && e.Compat {
		return newRefRegexp(subs)
	}
	// The parsed trees print with their flags made explicit ((?i:...)), so
	// joining them cannot let one pattern's syntax (\Q, flags) leak into
	// the next.
	all := &syntax.Regexp{Op: syntax.OpAlternate, Sub: subs}
	if len(subs) == 1 {
		all = subs[0]
	}
	re, err := regexp.Compile(all.String())
	if err != nil {
		return nil, fmt.Errorf("regexp: patterns do not compile together: %s", syntaxReason(err))
	}
	return &regexpFilter{re: re}, nil
}

// syntaxReason is a regexp error without the expression it quotes.
func syntaxReason(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return se.Code.String()
	}
	return "invalid"
}

// Decode returns in when it matches and ErrSkip when it does not.
func (d *regexpFilter) Decode(in []byte) ([]byte, error) {
	if d.re.Match(in) {
		return in[:len(in):len(in)], nil
	}
	return nil, ErrSkip
}

// refRegexp is the regexp decoder as cloudflare/ebpf_exporter runs it
// (Env.Compat): the patterns are tried in order, and the first that
// matches with at most one group gives the label: its group's text, or
// the matched text when it has none. A match of a pattern with more groups
// is passed over; no match skips the key.
type refRegexp struct{ res []*regexp.Regexp }

// newRefRegexp compiles each parsed pattern on its own.
func newRefRegexp(subs []*syntax.Regexp) (Decoder, error) {
	d := &refRegexp{res: make([]*regexp.Regexp, len(subs))}
	for i, sub := range subs {
		re, err := regexp.Compile(sub.String())
		if err != nil {
			return nil, fmt.Errorf("regexp: pattern %d does not compile: %s", i, syntaxReason(err))
		}
		d.res[i] = re
	}
	return d, nil
}

// Decode returns the group or match, or ErrSkip.
func (d *refRegexp) Decode(in []byte) ([]byte, error) {
	for _, re := range d.res {
		m := re.FindSubmatch(in)
		switch len(m) {
		case 1:
			return m[0][:len(m[0]):len(m[0])], nil
		case 2:
			return m[1][:len(m[1]):len(m[1])], nil
		}
	}
	return nil, ErrSkip
}
