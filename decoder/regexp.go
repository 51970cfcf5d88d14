package decoder

import (
	"fmt"
	"regexp"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("regexp", newRegexp) }

// regexpFilter keeps the keys whose label text matches at least one of
// conf.Regexps and drops the others: its Decode returns the input unchanged
// or ErrSkip. Patterns use Go's RE2 syntax and are not anchored (like grep):
// "^tcp_" matches names that start with tcp_, "tcp" any name containing it.
type regexpFilter struct{ res []*regexp.Regexp }

func newRegexp(_ *Env, conf config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	if len(conf.Regexps) == 0 {
		return nil, fmt.Errorf("regexp: no patterns (set regexps)")
	}
	res := make([]*regexp.Regexp, len(conf.Regexps))
	for i, p := range conf.Regexps {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("regexp: bad pattern %q: %v", p, err)
		}
		res[i] = re
	}
	return &regexpFilter{res: res}, nil
}

// Decode returns in when it matches and ErrSkip when it does not.
func (d *regexpFilter) Decode(in []byte) ([]byte, error) {
	for _, re := range d.res {
		if re.Match(in) {
			return in[:len(in):len(in)], nil
		}
	}
	return nil, ErrSkip
}
