// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"strings"
	"testing"
)

// TestExplainVerifier feeds verifier log tails seen on Debian 11's 5.10
// kernel (make test-kernels) and checks the missing helper, argument or
// kernel type is named.
func TestExplainVerifier(t *testing.T) {
	for _, tc := range []struct {
		log  []string
		want string
	}{
		{[]string{"; struct task_struct *task = bpf_get_current_task_btf();", "2: (85) call unknown#158", "invalid func unknown#158"},
			"helper bpf_get_current_task_btf (#158, Linux 5.11) not supported by this kernel"},
		{[]string{"; bpf_get_func_ret(ctx, &ret);", "5: (85) call unknown#184", "invalid func unknown#184"},
			"helper bpf_get_func_ret (#184, Linux 5.17) not supported by this kernel"},
		{[]string{"call unknown#211", "invalid func unknown#211"}, "helper bpf_"},
		{[]string{"; instruction poisoned by CO-RE", "43: (85) call unknown#195896080", "invalid func unknown#195896080"},
			"a CO-RE relocation matched nothing in this kernel's BTF"},
		{[]string{"func 'kfree_skb' arg0 has btf_id 2982 type STRUCT 'sk_buff'", "func 'kfree_skb' doesn't have 3-th argument", "invalid bpf_context access off=16 size=8"},
			"kfree_skb on this kernel passes fewer arguments than the program reads (no argument 3)"},
		{[]string{"R1 invalid mem access 'scalar'"}, ""},
		{nil, ""},
	} {
		got := explainVerifier(tc.log)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("explainVerifier(%q) = %q, want one with %q", tc.log, got, tc.want)
		}
	}
	if n := helperName(99999); n != "#99999" {
		t.Errorf("helperName(99999) = %q", n)
	}
	err := &lackingError{"load: x", errors.New("cause")}
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("lackingError is not ErrUnsupported")
	}
}
